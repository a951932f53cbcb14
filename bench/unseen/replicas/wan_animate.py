"""Wan 2.2 Animate-14B video DiT (character animation from a pose video and a face video), reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_wan_animate.py at
dfad05625ee185368e0e23cc9e93aaae77d49e85 (WanAnimateTransformer3DModel; FusedLeakyReLU, MotionConv2d, MotionLinear,
MotionEncoderResBlock, WanAnimateMotionEncoder, WanAnimateFaceEncoder, WanAnimateFaceBlockCrossAttention with
WanAnimateFaceBlockAttnProcessor's __call__ as its forward) and the classes that file copies from transformer_wan.py
(WanAttention with WanAttnProcessor, WanImageEmbedding, WanTimeTextImageEmbedding, WanRotaryPosEmbed,
WanTransformerBlock), imported from wan22_ti2v.py where they are the same code (its WanRotaryPosEmbed splits the
table as [D - 2·(D//3), D//3, D//3], this commit's as [t_dim, h_dim, w_dim]: equal for the head dim 12 used here and
for Animate's 128); the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for
line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (eps given) and dispatch_attention_fn (SDPA's math on
[B, L, H, D], default scale, no mask). MotionConv2d's blur kernel (a non-persistent f32 buffer) is cast to the input's
dtype before the depthwise conv, as diffusers#13364 (merged after the stored commit, which would fail in bf16) does;
the face encoder's replicate padding, which torch 1.13 lacks for bf16 on the CPU, is there the same copies joined.

The constructs it shows beside Wan 2.1 I2V's: the pose latents through their own 3-D conv patchify, added onto every
latent frame but the first (the reference slot) before flattening; the face video (pixels) split into batches of
motion_encoder_batch_size frames through the motion encoder (a StyleGAN-like encoder: 1x1 conv + fused leaky ReLU
(x + b, leaky 0.2, ·√2) with equalized-lr weights (W·1/√fan_in), res blocks with a [1,3,3,1] FIR blur then a stride-2
3x3 conv, a blurred stride-2 1x1 skip, (out + skip)/√2, a 4x4 conv to 1x1, 5 equalized linears) whose motion
features α weight the orthonormal columns of QR(motion_synthesis_weight + 1e-8) (Σ_j α_j·Q[:, j] via diag_embed,
matmul and sum, in f32); the face encoder: causal (replicate-padded) Conv1d over frames into num_heads groups,
LayerNorm, SiLU, two stride-2 causal Conv1d + LayerNorm + SiLU, a linear to the model width, a learned padding token
appended per frame, a zero frame prepended; every inject_face_latents_blocks-th block followed by a face adapter:
the video tokens of each latent frame cross-attend the face tokens of that frame (pre-LayerNorms, per-head RMSNorm on
q and k), added residually.

Pipeline as WanAnimatePipeline (mode "animate", one segment, no guidance: guidance_scale 1 is its default) calls it:
latent_model_input = [latents, reference_latents] on channels (latents with a leading reference-slot frame;
reference_latents = the reference image's [mask of ones, latents] frame followed by the segment's [mask of zeros,
prev-segment latents] frames), timestep = t.expand(B) (UniPC: int(σ·1000), int64), the 512-row prompt embeds, the CLIP
image embeds, the pose latents (one frame fewer than the model input), the face video in pixels at
motion_encoder_size², motion_encode_batch_size None (the config's); velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/wan_animate.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa
from wan22_ti2v import (FP32LayerNorm, RMSNorm, WanRotaryPosEmbed, WanTimeTextImageEmbedding,
                        WanTransformerBlock)

WAN_ANIMATE_MOTION_ENCODER_CHANNEL_SIZES = {
    "4": 512, "8": 512, "16": 512, "32": 512, "64": 256, "128": 128, "256": 64, "512": 32, "1024": 16,
}


class FusedLeakyReLU(nn.Module):
    def __init__(self, negative_slope=0.2, scale=2 ** 0.5, bias_channels=None):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale
        self.channels = bias_channels
        if self.channels is not None:
            self.bias = nn.Parameter(torch.zeros(self.channels,))
        else:
            self.bias = None

    def forward(self, x, channel_dim=1):
        if self.bias is not None:
            expanded_shape = [1] * x.ndim
            expanded_shape[channel_dim] = self.bias.shape[0]
            bias = self.bias.reshape(*expanded_shape)
            x = x + bias
        return F.leaky_relu(x, self.negative_slope) * self.scale


class MotionConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True, blur_kernel=None,
                 blur_upsample_factor=1, use_activation=True):
        super().__init__()
        self.use_activation = use_activation
        self.in_channels = in_channels
        self.blur = False
        if blur_kernel is not None:
            p = (len(blur_kernel) - stride) + (kernel_size - 1)
            self.blur_padding = ((p + 1) // 2, p // 2)
            kernel = torch.tensor(blur_kernel)
            if kernel.ndim == 1:
                kernel = kernel[None, :] * kernel[:, None]
            kernel = kernel / kernel.sum()
            if blur_upsample_factor > 1:
                kernel = kernel * (blur_upsample_factor ** 2)
            self.register_buffer("blur_kernel", kernel, persistent=False)
            self.blur = True
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.scale = 1 / math.sqrt(in_channels * kernel_size ** 2)
        self.stride = stride
        self.padding = padding
        if bias and not self.use_activation:
            self.bias = nn.Parameter(torch.zeros(out_channels))
        else:
            self.bias = None
        if self.use_activation:
            self.act_fn = FusedLeakyReLU(bias_channels=out_channels)
        else:
            self.act_fn = None

    def forward(self, x, channel_dim=1):
        if self.blur:
            # the original's upfirdn2d with up = down = 1: a depthwise 2-D conv (kernel cast to x's dtype: #13364)
            expanded_kernel = self.blur_kernel[None, None, :, :].expand(self.in_channels, 1, -1, -1).to(x.dtype)
            x = F.conv2d(x, expanded_kernel, padding=self.blur_padding, groups=self.in_channels)
        x = F.conv2d(x, self.weight * self.scale, bias=self.bias, stride=self.stride, padding=self.padding)
        if self.use_activation:
            x = self.act_fn(x, channel_dim=channel_dim)
        return x


class MotionLinear(nn.Module):
    def __init__(self, in_dim, out_dim, bias=True, use_activation=False):
        super().__init__()
        self.use_activation = use_activation
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim))
        self.scale = 1 / math.sqrt(in_dim)
        if bias and not self.use_activation:
            self.bias = nn.Parameter(torch.zeros(out_dim))
        else:
            self.bias = None
        if self.use_activation:
            self.act_fn = FusedLeakyReLU(bias_channels=out_dim)
        else:
            self.act_fn = None

    def forward(self, input, channel_dim=1):
        out = F.linear(input, self.weight * self.scale, bias=self.bias)
        if self.use_activation:
            out = self.act_fn(out, channel_dim=channel_dim)
        return out


class MotionEncoderResBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, kernel_size_skip=1, blur_kernel=(1, 3, 3, 1),
                 downsample_factor=2):
        super().__init__()
        self.downsample_factor = downsample_factor
        self.conv1 = MotionConv2d(in_channels, in_channels, kernel_size, stride=1, padding=kernel_size // 2,
                                  use_activation=True)
        self.conv2 = MotionConv2d(in_channels, out_channels, kernel_size=kernel_size, stride=self.downsample_factor,
                                  padding=0, blur_kernel=blur_kernel, use_activation=True)
        self.conv_skip = MotionConv2d(in_channels, out_channels, kernel_size=kernel_size_skip,
                                      stride=self.downsample_factor, padding=0, bias=False, blur_kernel=blur_kernel,
                                      use_activation=False)

    def forward(self, x, channel_dim=1):
        x_out = self.conv1(x, channel_dim)
        x_out = self.conv2(x_out, channel_dim)
        x_skip = self.conv_skip(x, channel_dim)
        x_out = (x_out + x_skip) / math.sqrt(2)
        return x_out


class WanAnimateMotionEncoder(nn.Module):
    def __init__(self, size=512, style_dim=512, motion_dim=20, out_dim=512, motion_blocks=5, channels=None):
        super().__init__()
        self.size = size
        if channels is None:
            channels = WAN_ANIMATE_MOTION_ENCODER_CHANNEL_SIZES
        self.conv_in = MotionConv2d(3, channels[str(size)], 1, use_activation=True)
        self.res_blocks = nn.ModuleList()
        in_channels = channels[str(size)]
        log_size = int(math.log(size, 2))
        for i in range(log_size, 2, -1):
            out_channels = channels[str(2 ** (i - 1))]
            self.res_blocks.append(MotionEncoderResBlock(in_channels, out_channels))
            in_channels = out_channels
        self.conv_out = MotionConv2d(in_channels, style_dim, 4, padding=0, bias=False, use_activation=False)
        linears = [MotionLinear(style_dim, style_dim) for _ in range(motion_blocks - 1)]
        linears.append(MotionLinear(style_dim, motion_dim))
        self.motion_network = nn.ModuleList(linears)
        self.motion_synthesis_weight = nn.Parameter(torch.randn(out_dim, motion_dim))

    def forward(self, face_image, channel_dim=1):
        if (face_image.shape[-2] != self.size) or (face_image.shape[-1] != self.size):
            raise ValueError(f"face pixel values at {tuple(face_image.shape[-2:])}, expected {self.size}")
        face_image = self.conv_in(face_image, channel_dim)
        for block in self.res_blocks:
            face_image = block(face_image, channel_dim)
        face_image = self.conv_out(face_image, channel_dim)
        motion_feat = face_image.squeeze(-1).squeeze(-1)
        for linear_layer in self.motion_network:
            motion_feat = linear_layer(motion_feat, channel_dim=channel_dim)
        # Motion synthesis via Linear Motion Decomposition, the QR in f32
        weight = self.motion_synthesis_weight + 1e-8
        original_motion_dtype = motion_feat.dtype
        motion_feat = motion_feat.to(torch.float32)
        weight = weight.to(torch.float32)
        Q = torch.linalg.qr(weight)[0].to(device=motion_feat.device)
        motion_feat_diag = torch.diag_embed(motion_feat)
        motion_decomposition = torch.matmul(motion_feat_diag, Q.T)
        motion_vec = torch.sum(motion_decomposition, dim=1)
        motion_vec = motion_vec.to(dtype=original_motion_dtype)
        return motion_vec


def _pad(x, pad, mode):
    """F.pad; torch 1.13 lacks replicate padding of bf16 on the CPU: there the same copies, joined (exact)."""
    try:
        return F.pad(x, pad, mode=mode)
    except RuntimeError:
        if mode != "replicate" or len(pad) != 2:
            raise
        return torch.cat([x[..., :1]] * pad[0] + [x] + [x[..., -1:]] * pad[1], dim=-1)


class WanAnimateFaceEncoder(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_dim=1024, num_heads=4, kernel_size=3, eps=1e-6, pad_mode="replicate"):
        super().__init__()
        self.num_heads = num_heads
        self.time_causal_padding = (kernel_size - 1, 0)
        self.pad_mode = pad_mode
        self.act = nn.SiLU()
        self.conv1_local = nn.Conv1d(in_dim, hidden_dim * num_heads, kernel_size=kernel_size, stride=1)
        self.conv2 = nn.Conv1d(hidden_dim, hidden_dim, kernel_size, stride=2)
        self.conv3 = nn.Conv1d(hidden_dim, hidden_dim, kernel_size, stride=2)
        self.norm1 = nn.LayerNorm(hidden_dim, eps, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(hidden_dim, eps, elementwise_affine=False)
        self.norm3 = nn.LayerNorm(hidden_dim, eps, elementwise_affine=False)
        self.out_proj = nn.Linear(hidden_dim, out_dim)
        self.padding_tokens = nn.Parameter(torch.zeros(1, 1, 1, out_dim))

    def forward(self, x):
        batch_size = x.shape[0]
        x = x.permute(0, 2, 1)
        x = _pad(x, self.time_causal_padding, mode=self.pad_mode)
        x = self.conv1_local(x)  # [B, C, T_padded] --> [B, N * C, T]
        x = x.unflatten(1, (self.num_heads, -1)).flatten(0, 1)  # [B * N, C, T]
        x = x.permute(0, 2, 1)
        x = self.norm1(x)
        x = self.act(x)

        x = x.permute(0, 2, 1)
        x = _pad(x, self.time_causal_padding, mode=self.pad_mode)
        x = self.conv2(x)
        x = x.permute(0, 2, 1)
        x = self.norm2(x)
        x = self.act(x)

        x = x.permute(0, 2, 1)
        x = _pad(x, self.time_causal_padding, mode=self.pad_mode)
        x = self.conv3(x)
        x = x.permute(0, 2, 1)
        x = self.norm3(x)
        x = self.act(x)

        x = self.out_proj(x)
        x = x.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3)  # [B * N, T, C_out] --> [B, T, N, C_out]
        padding = self.padding_tokens.repeat(batch_size, x.shape[1], 1, 1).to(device=x.device)
        x = torch.cat([x, padding], dim=-2)  # [B, T, N + 1, C_out]
        return x


class WanAnimateFaceBlockCrossAttention(nn.Module):
    """With WanAnimateFaceBlockAttnProcessor's __call__ as its forward (unfused projections)."""

    def __init__(self, dim, heads=8, dim_head=64, eps=1e-6, cross_attention_dim_head=None, processor=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.cross_attention_head_dim = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.pre_norm_q = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.pre_norm_kv = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = nn.Linear(self.inner_dim, dim, bias=True)
        self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=True)
        self.fused_projections = False

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        attn = self
        hidden_states = attn.pre_norm_q(hidden_states)
        encoder_hidden_states = attn.pre_norm_kv(encoder_hidden_states)
        B, T, N, C = encoder_hidden_states.shape
        # _get_qkv_projections, unfused
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = query.unflatten(2, (attn.heads, -1))  # [B, S, H, D]
        key = key.view(B, T, N, attn.heads, -1)  # [B, T, N, H, D_kv]
        value = value.view(B, T, N, attn.heads, -1)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(1, (T, -1)).flatten(0, 1)  # [B * T, S / T, H, D]
        key = key.flatten(0, 1)  # [B * T, N, H, D_kv]
        value = value.flatten(0, 1)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, no mask
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = hidden_states.unflatten(0, (B, T)).flatten(1, 2)

        hidden_states = attn.to_out(hidden_states)
        if attention_mask is not None:
            attention_mask = attention_mask.flatten(start_dim=1)
            hidden_states = hidden_states * attention_mask
        return hidden_states


class WanAnimateTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3",
                             "motion_synthesis_weight"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=36,
                 latent_channels=16, out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40,
                 cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=1280,
                 added_kv_proj_dim=None, rope_max_seq_len=1024, pos_embed_seq_len=None,
                 motion_encoder_channel_sizes=None, motion_encoder_size=512, motion_style_dim=512, motion_dim=20,
                 motion_encoder_dim=512, face_encoder_hidden_dim=1024, face_encoder_num_heads=4,
                 inject_face_latents_blocks=5, motion_encoder_batch_size=8):
        super().__init__()
        # the config (register_to_config)
        self.patch_size = patch_size
        self.inject_face_latents_blocks = inject_face_latents_blocks
        self.motion_encoder_batch_size = motion_encoder_batch_size

        inner_dim = num_attention_heads * attention_head_dim
        if in_channels is None and latent_channels is not None:
            in_channels = 2 * latent_channels + 4
        elif in_channels is not None and latent_channels is None:
            latent_channels = (in_channels - 4) // 2
        elif in_channels is not None and latent_channels is not None:
            assert in_channels == 2 * latent_channels + 4, "in_channels should be 2 * latent_channels + 4"
        else:
            raise ValueError("At least one of `in_channels` and `latent_channels` must be supplied.")
        out_channels = out_channels or latent_channels

        self.rope = WanRotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.pose_patch_embedding = nn.Conv3d(latent_channels, inner_dim, kernel_size=patch_size, stride=patch_size)

        self.condition_embedder = WanTimeTextImageEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                            time_proj_dim=inner_dim * 6, text_embed_dim=text_dim,
                                                            image_embed_dim=image_dim,
                                                            pos_embed_seq_len=pos_embed_seq_len)
        self.motion_encoder = WanAnimateMotionEncoder(size=motion_encoder_size, style_dim=motion_style_dim,
                                                      motion_dim=motion_dim, out_dim=motion_encoder_dim,
                                                      channels=motion_encoder_channel_sizes)
        self.face_encoder = WanAnimateFaceEncoder(in_dim=motion_encoder_dim, out_dim=inner_dim,
                                                  hidden_dim=face_encoder_hidden_dim,
                                                  num_heads=face_encoder_num_heads)
        self.blocks = nn.ModuleList([WanTransformerBlock(dim=inner_dim, ffn_dim=ffn_dim, num_heads=num_attention_heads,
                                                         qk_norm=qk_norm, cross_attn_norm=cross_attn_norm, eps=eps,
                                                         added_kv_proj_dim=added_kv_proj_dim)
                                     for _ in range(num_layers)])
        self.face_adapter = nn.ModuleList([
            WanAnimateFaceBlockCrossAttention(dim=inner_dim, heads=num_attention_heads,
                                              dim_head=inner_dim // num_attention_heads, eps=eps,
                                              cross_attention_dim_head=inner_dim // num_attention_heads)
            for _ in range(num_layers // inject_face_latents_blocks)])

        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                pose_hidden_states=None, face_pixel_values=None, motion_encode_batch_size=None, return_dict=True,
                attention_kwargs=None):
        if pose_hidden_states is not None and pose_hidden_states.shape[2] + 1 != hidden_states.shape[2]:
            raise ValueError("pose_hidden_states must have one frame fewer than hidden_states")

        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w

        # 1. Rotary position embedding
        rotary_emb = self.rope(hidden_states)

        # 2. Patch embedding
        hidden_states = self.patch_embedding(hidden_states)
        pose_hidden_states = self.pose_patch_embedding(pose_hidden_states)
        hidden_states[:, :, 1:] = hidden_states[:, :, 1:] + pose_hidden_states
        hidden_states = hidden_states.flatten(2).transpose(1, 2).contiguous()

        # 3. Condition embeddings (time, text, image): Wan 2.1's timestep logic
        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, encoder_hidden_states, encoder_hidden_states_image, timestep_seq_len=None)
        timestep_proj = timestep_proj.unflatten(1, (6, -1))

        if encoder_hidden_states_image is not None:
            encoder_hidden_states = torch.concat([encoder_hidden_states_image, encoder_hidden_states], dim=1)

        # 4. Motion features from the face video
        batch_size, channels, num_face_frames, height, width = face_pixel_values.shape
        face_pixel_values = face_pixel_values.permute(0, 2, 1, 3, 4).reshape(-1, channels, height, width)
        motion_encode_batch_size = motion_encode_batch_size or self.motion_encoder_batch_size
        face_batches = torch.split(face_pixel_values, motion_encode_batch_size)
        motion_vec_batches = []
        for face_batch in face_batches:
            motion_vec_batch = self.motion_encoder(face_batch)
            motion_vec_batches.append(motion_vec_batch)
        motion_vec = torch.cat(motion_vec_batches)
        motion_vec = motion_vec.view(batch_size, num_face_frames, -1)

        motion_vec = self.face_encoder(motion_vec)

        pad_face = torch.zeros_like(motion_vec[:, :1])
        motion_vec = torch.cat([pad_face, motion_vec], dim=1)

        # 5. Transformer blocks with face adapter integration
        for block_idx, block in enumerate(self.blocks):
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb)
            if block_idx % self.inject_face_latents_blocks == 0:
                face_adapter_block_idx = block_idx // self.inject_face_latents_blocks
                face_adapter_output = self.face_adapter[face_adapter_block_idx](hidden_states, motion_vec)
                face_adapter_output = face_adapter_output.to(device=hidden_states.device)
                hidden_states = face_adapter_output + hidden_states

        # 6. Output norm, projection & unpatchify
        shift, scale = (self.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
        hidden_states_original_dtype = hidden_states.dtype
        hidden_states = self.norm_out(hidden_states.float())
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)
        hidden_states = (hidden_states * (1 + scale) + shift).to(dtype=hidden_states_original_dtype)

        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


def build():
    # 2 heads of 12 (RoPE t/h/w 4/4/4), 2 blocks with a face adapter after block 0 (inject_face_latents_blocks 2;
    # 40 blocks and every 5th upstream), text 16 wide, CLIP tokens 12 wide, added_kv_proj_dim the inner width as
    # Animate-14B's config; 4 latent channels (16 upstream: in 2·4 + 4 = 12). Motion encoder at 8x8 face pixels (512
    # upstream): conv_in 3→4, one res block 4→8 (8x8→4x4; seven upstream), a 4x4 conv to style 8, 5 linears to
    # motion_dim 4, QR of an [8, 4] weight; face encoder 4 heads of hidden 8 (1024 upstream); motion batches of 2.
    return WanAnimateTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=12, latent_channels=4,
        out_channels=4, text_dim=16, freq_dim=16, ffn_dim=48, num_layers=2, cross_attn_norm=True,
        qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=12, added_kv_proj_dim=24, rope_max_seq_len=32,
        motion_encoder_channel_sizes={"8": 4, "4": 8}, motion_encoder_size=8, motion_style_dim=8, motion_dim=4,
        motion_encoder_dim=8, face_encoder_hidden_dim=8, face_encoder_num_heads=4, inject_face_latents_blocks=2,
        motion_encoder_batch_size=2)


def inputs(g):
    # segment_frame_length 5 (77 upstream): 2 latent frames + the reference slot, 4x4 latents; 5 face frames
    # (face encoder: 5 → 3 → 2 frames, + the zero frame = 3)
    ref_mask = torch.ones((1, 4, 1, 4, 4))  # get_i2v_mask(mask_len=1) over the reference image's one frame
    prev_mask = torch.zeros((1, 4, 2, 4, 4))  # first segment: mask_len 0
    reference_latents = torch.cat([
        torch.cat([ref_mask, torch.randn((1, 4, 1, 4, 4), generator=g)], dim=1),
        torch.cat([prev_mask, torch.randn((1, 4, 2, 4, 4), generator=g)], dim=1)], dim=2)
    return {"encoder_hidden_states": torch.randn((1, 512, 16), generator=g),
            "encoder_hidden_states_image": torch.randn((1, 5, 12), generator=g),
            "reference_latents": reference_latents,
            "pose_hidden_states": torch.randn((1, 4, 2, 4, 4), generator=g),
            "face_pixel_values": (2 * torch.rand((1, 3, 5, 8, 8), generator=g) - 1),
            "noise": torch.randn((1, 4, 3, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([int(sigma * 1000)], dtype=torch.int64, device=x.device).expand(x.shape[0])
    latent_model_input = torch.cat([x, c["reference_latents"]], dim=1).to(x.dtype)
    return model(hidden_states=latent_model_input, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_hidden_states_image=c["encoder_hidden_states_image"],
                 pose_hidden_states=c["pose_hidden_states"], face_pixel_values=c["face_pixel_values"],
                 motion_encode_batch_size=None, attention_kwargs=None, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_wan_animate.py@dfad05625ee1 and the parts it "
                   "imports (torch 1.13)",
    timestep="int(sigma*1000) int64 expanded to the batch (UniPC, WanAnimatePipeline's t.expand(B))",
    velocity="model output as is (flow prediction), not negated; input [latents, reference latents] on channels",
    note="Wan 2.2 Animate DiT (Wan 2.1 I2V body), 2 blocks, a face adapter after block 0: pose latents through "
         "their own conv patchify added onto frames 1.. of the patch embedding; face pixels in batches of 2 frames "
         "through a StyleGAN-like motion encoder (equalized-lr 1x1 conv + fused leaky ReLU, a res block of "
         "[1,3,3,1]-blurred stride-2 convs with (out + skip)/sqrt2, 4x4 conv, 5 linears) and a QR motion "
         "decomposition (sum_j a_j Q[:, j], f32); a face encoder of causal replicate-padded Conv1d (4 groups), "
         "LayerNorm, SiLU, two stride-2 Conv1d, out_proj, a padding token per frame and a zero frame prepended; the "
         "face adapter: per latent frame, the frame's video tokens cross-attend its 5 face tokens (pre-LayerNorms, "
         "per-head RMSNorm q/k), added residually; CLIP image tokens through add_k/add_v beside 512 text rows; "
         "3 latent frames (1 reference slot) of 4x4")

if __name__ == "__main__":
    capture("wan_animate", build, inputs, call, sys.argv[1], PRODUCER)
