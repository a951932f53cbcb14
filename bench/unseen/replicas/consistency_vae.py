"""diffusers' ConsistencyDecoderVAE (OpenAI's consistency decoder, DALL-E 3's: Stable Diffusion's KL encoder, and a
pixel-space UNet2DModel run as a 2-step consistency sampler in place of the VAE decoder), reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU as one forward: an image encoded, the posterior's mode taken,
decoded by the scheduler's two UNet steps.

Follows huggingface/diffusers line for line: src/diffusers/models/autoencoders/consistency_decoder_vae.py at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1 (ConsistencyDecoderVAE: encoder = vae.py's Encoder with double_z,
quant_conv 1x1 on 2·latent_channels, decoder_unet = UNet2DModel(add_attention=False, ResnetDownsampleBlock2D /
ResnetUpsampleBlock2D, in_channels 7, out_channels 6, resnet_time_scale_shift "scale_shift", time_embedding_type
"learned"), decoder_scheduler = ConsistencyDecoderScheduler(), the buffers means and stds; forward(sample) with its
default sample_posterior=False: z = DiagonalGaussianDistribution(quant_conv(encoder(sample))).mode(), then decode(z,
generator): z = (z * scaling_factor - means) / stds, F.interpolate(z, mode="nearest", scale_factor=2 **
(len(block_out_channels) - 1)), set_timesteps(2), x_t = init_noise_sigma * randn_tensor((B, 3, H, W)), per t in
timesteps: model_input = concat([scale_model_input(x_t, t), z], dim=1), model_output = decoder_unet(model_input,
t).sample[:, :3], x_t = step(model_output, t, x_t, generator).prev_sample);
src/diffusers/schedulers/scheduling_consistency_decoder.py at 4f943872d0c76fb7236fadf858904eb856985486
(betas_for_alpha_bar(1024) cosine, in f32: alphas_cumprod, sigmas = sqrt(1 / alphas_cumprod - 1), c_skip =
sqrt(1 / alphas_cumprod) * sigma_data² / (sigmas² + sigma_data²), c_out = sigmas * sigma_data / (sigmas² +
sigma_data²) ** 0.5, c_in = sqrt(1 / alphas_cumprod) / (sigmas² + sigma_data²) ** 0.5, sigma_data 0.5; timesteps
[1008, 512] (long); init_noise_sigma = sqrt_one_minus_alphas_cumprod[1008]; scale_model_input: sample * c_in[t];
step: x_0 = c_out[t] * model_output + c_skip[t] * sample, then the last step's x_0 as is, else
sqrt_alphas_cumprod[next t] * x_0 + sqrt_one_minus_alphas_cumprod[next t] * randn_tensor(x_0.shape));
src/diffusers/models/unets/unet_2d.py at 4004496d6bc4131d08ac7d01a44060632bfef40d (UNet2DModel: time_proj =
nn.Embedding(num_train_timesteps, block_out_channels[0]) for "learned", timesteps[None] * ones(batch) (long),
t_emb.to(dtype), TimestepEmbedding, conv_in, down blocks collecting res samples, UNetMidBlock2D, up blocks popping
them, GroupNorm-SiLU-conv_out) and src/diffusers/models/unets/unet_2d_blocks.py at
6d2682f34d2cc70f86329ea19ee46781e75c1c95 (ResnetDownsampleBlock2D: resnets, then a ResnetBlock2D with down=True as
the downsampler, called with temb; ResnetUpsampleBlock2D: resnets on the input joined by channels with the popped
res samples, then a ResnetBlock2D with up=True; UNetMidBlock2D with add_attention False: resnets[0], then attentions
[None] skipped and resnets[1]); resnet.py's ResnetBlock2D (sd_unet.py's class: time_embedding_norm "scale_shift":
SiLU, time_emb_proj to twice the width, chunked, norm2(x) * (1 + scale) + shift; down: AvgPool2d(2) of the input and
of the normed map before conv1 (Downsample2D(use_conv=False)); up: nearest ×2 of both (Upsample2D(use_conv=False))).
Encoder is vae.py's replica's class (the same upstream code as AutoencoderKL's, mid block attention included). The
same module tree, parameter names and shapes, call boundaries and arithmetic. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path).

Deviations, both around randomness and placement, none in the f32 arithmetic:
- upstream draws two tensors from forward's generator, x_t's start (randn_tensor((B, 3, H, W))) and the first step's
  noise (randn_tensor(x_0.shape)); here they are the request's inputs noise and step_noise, drawn by inputs() from the
  seeded generator right after the image, in upstream's order (so equal, in f32, to forward(sample, generator=g)),
  and forward takes them in place of the generator. (In bf16 they are the f32 draws cast, as run.py casts inputs.)
- means and stds are registered persistent (upstream: persistent=False), for the bf16 run only: from_pretrained's
  final model.to(bf16) casts them, weights.place casts persistent buffers only, and f32 ones would promote z to f32
  against the bf16 UNet. Buffers are not recorded in a trace, so the f32 trace is unaffected.

Tiny config: scaling_factor 0.18215, latent_channels 4 (means and stds are upstream's 4-channel constants), encoder
(8, 16) with 1 resnet per level, 4 groups; decoder_unet block_out_channels (8, 16) (time_embed_dim 32),
layers_per_block 1 (so 1 resnet per down level, 2 per up level), norm_num_groups 4, norm_eps 1e-5,
num_train_timesteps 1024, in 7 (3 noisy pixels + 4 latent channels), out 6 (the first 3 read). num_inference_steps 2
(the only count the scheduler accepts). A [1, 3, 12, 12] image -> latent [1, 4, 6, 6] -> nearest ×2 to 12² ->
2 UNet steps at 12² (6² inside) -> [1, 3, 12, 12].

usage: /usr/bin/python3 bench/unseen/replicas/consistency_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding
from run import capture_once
from sd_unet import ResnetBlock2D
from vae import Encoder


def betas_for_alpha_bar(num_diffusion_timesteps, max_beta=0.999, alpha_transform_type="cosine"):
    if alpha_transform_type == "cosine":
        def alpha_bar_fn(t):
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
    elif alpha_transform_type == "exp":
        def alpha_bar_fn(t):
            return math.exp(t * -12.0)
    else:
        raise ValueError(f"Unsupported alpha_transform_type: {alpha_transform_type}")
    betas = []
    for i in range(num_diffusion_timesteps):
        t1 = i / num_diffusion_timesteps
        t2 = (i + 1) / num_diffusion_timesteps
        betas.append(min(1 - alpha_bar_fn(t2) / alpha_bar_fn(t1), max_beta))
    return torch.tensor(betas, dtype=torch.float32)


class ConsistencyDecoderScheduler:
    order = 1

    def __init__(self, num_train_timesteps=1024, sigma_data=0.5):
        betas = betas_for_alpha_bar(num_train_timesteps)
        alphas = 1.0 - betas
        alphas_cumprod = torch.cumprod(alphas, dim=0)
        self.sqrt_alphas_cumprod = torch.sqrt(alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = torch.sqrt(1.0 - alphas_cumprod)
        sigmas = torch.sqrt(1.0 / alphas_cumprod - 1)
        sqrt_recip_alphas_cumprod = torch.sqrt(1.0 / alphas_cumprod)
        self.c_skip = sqrt_recip_alphas_cumprod * sigma_data**2 / (sigmas**2 + sigma_data**2)
        self.c_out = sigmas * sigma_data / (sigmas**2 + sigma_data**2) ** 0.5
        self.c_in = sqrt_recip_alphas_cumprod / (sigmas**2 + sigma_data**2) ** 0.5

    def set_timesteps(self, num_inference_steps=None, device=None):
        if num_inference_steps != 2:
            raise ValueError("Currently more than 2 inference steps are not supported.")
        self.timesteps = torch.tensor([1008, 512], dtype=torch.long, device=device)
        self.sqrt_alphas_cumprod = self.sqrt_alphas_cumprod.to(device)
        self.sqrt_one_minus_alphas_cumprod = self.sqrt_one_minus_alphas_cumprod.to(device)
        self.c_skip = self.c_skip.to(device)
        self.c_out = self.c_out.to(device)
        self.c_in = self.c_in.to(device)

    @property
    def init_noise_sigma(self):
        return self.sqrt_one_minus_alphas_cumprod[self.timesteps[0]]

    def scale_model_input(self, sample, timestep=None):
        return sample * self.c_in[timestep]

    def step(self, model_output, timestep, sample, noise):
        """upstream's step(model_output, timestep, sample, generator).prev_sample, its randn_tensor(x_0.shape,
        generator=generator, dtype=x_0.dtype) given as noise."""
        x_0 = self.c_out[timestep] * model_output + self.c_skip[timestep] * sample
        timestep_idx = torch.where(self.timesteps == timestep)[0]
        if timestep_idx == len(self.timesteps) - 1:
            prev_sample = x_0
        else:
            noise = noise.to(dtype=x_0.dtype, device=x_0.device)
            prev_sample = (
                self.sqrt_alphas_cumprod[self.timesteps[timestep_idx + 1]].to(x_0.dtype) * x_0
                + self.sqrt_one_minus_alphas_cumprod[self.timesteps[timestep_idx + 1]].to(x_0.dtype) * noise
            )
        return prev_sample


class ResnetDownsampleBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, num_layers, resnet_eps, resnet_time_scale_shift,
                 resnet_groups, add_downsample):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(in_channels, out_channels, temb_channels, resnet_groups, eps=resnet_eps,
                                         norm=resnet_time_scale_shift))
        self.resnets = nn.ModuleList(resnets)
        if add_downsample:
            self.downsamplers = nn.ModuleList([
                ResnetBlock2D(out_channels, out_channels, temb_channels, resnet_groups, eps=resnet_eps,
                              norm=resnet_time_scale_shift, down=True)])
        else:
            self.downsamplers = None

    def forward(self, hidden_states, temb=None):
        output_states = ()
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states, temb)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class ResnetUpsampleBlock2D(nn.Module):
    def __init__(self, in_channels, prev_output_channel, out_channels, temb_channels, num_layers, resnet_eps,
                 resnet_time_scale_shift, resnet_groups, add_upsample):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels,
                                         resnet_groups, eps=resnet_eps, norm=resnet_time_scale_shift))
        self.resnets = nn.ModuleList(resnets)
        if add_upsample:
            self.upsamplers = nn.ModuleList([
                ResnetBlock2D(out_channels, out_channels, temb_channels, resnet_groups, eps=resnet_eps,
                              norm=resnet_time_scale_shift, up=True)])
        else:
            self.upsamplers = None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None):
        for resnet in self.resnets:
            # pop res hidden states
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, temb)
        return hidden_states


class UNetMidBlock2D(nn.Module):
    """add_attention=False, num_layers 1: resnets[0], then (attn None) resnets[1]."""

    def __init__(self, in_channels, temb_channels, resnet_eps, resnet_time_scale_shift, resnet_groups):
        super().__init__()
        self.add_attention = False
        self.attentions = nn.ModuleList([None])
        self.resnets = nn.ModuleList([
            ResnetBlock2D(in_channels, in_channels, temb_channels, resnet_groups, eps=resnet_eps,
                          norm=resnet_time_scale_shift) for _ in range(2)])

    def forward(self, hidden_states, temb=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                hidden_states = attn(hidden_states, temb=temb)
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class UNet2DModel(nn.Module):
    """time_embedding_type "learned", ResnetDownsampleBlock2D / ResnetUpsampleBlock2D, no class embedding."""

    def __init__(self, in_channels=7, out_channels=6, block_out_channels=(8, 16), layers_per_block=1,
                 norm_num_groups=4, norm_eps=1e-5, resnet_time_scale_shift="scale_shift", num_train_timesteps=1024):
        super().__init__()
        time_embed_dim = block_out_channels[0] * 4
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=(1, 1))
        self.time_proj = nn.Embedding(num_train_timesteps, block_out_channels[0])
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.class_embedding = None

        self.down_blocks = nn.ModuleList([])
        output_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            self.down_blocks.append(ResnetDownsampleBlock2D(
                input_channel, output_channel, time_embed_dim, layers_per_block, norm_eps, resnet_time_scale_shift,
                norm_num_groups, not is_final_block))

        self.mid_block = UNetMidBlock2D(block_out_channels[-1], time_embed_dim, norm_eps, resnet_time_scale_shift,
                                        norm_num_groups)

        self.up_blocks = nn.ModuleList([])
        reversed_block_out_channels = list(reversed(block_out_channels))
        output_channel = reversed_block_out_channels[0]
        for i in range(len(block_out_channels)):
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            is_final_block = i == len(block_out_channels) - 1
            self.up_blocks.append(ResnetUpsampleBlock2D(
                input_channel, prev_output_channel, output_channel, time_embed_dim, layers_per_block + 1, norm_eps,
                resnet_time_scale_shift, norm_num_groups, not is_final_block))

        num_groups_out = norm_num_groups
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=num_groups_out, eps=norm_eps)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def forward(self, sample, timestep, class_labels=None, return_dict=True):
        # 1. time
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            timesteps = torch.tensor([timesteps], dtype=torch.long, device=sample.device)
        elif torch.is_tensor(timesteps) and len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps * torch.ones(sample.shape[0], dtype=timesteps.dtype, device=timesteps.device)
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=self.dtype)
        emb = self.time_embedding(t_emb)

        # 2. pre-process
        sample = self.conv_in(sample)

        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples

        # 4. mid
        sample = self.mid_block(sample, emb)

        # 5. up
        for upsample_block in self.up_blocks:
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            sample = upsample_block(sample, res_samples, emb)

        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)  # UNet2DOutput(sample=sample).sample


class ConsistencyDecoderVAE(nn.Module):
    def __init__(self, scaling_factor=0.18215, latent_channels=4, encoder_block_out_channels=(8, 16),
                 encoder_in_channels=3, encoder_layers_per_block=1, encoder_norm_num_groups=4, encoder_out_channels=4,
                 decoder_block_out_channels=(8, 16), decoder_in_channels=7, decoder_layers_per_block=1,
                 decoder_norm_eps=1e-5, decoder_norm_num_groups=4, decoder_num_train_timesteps=1024,
                 decoder_out_channels=6, decoder_resnet_time_scale_shift="scale_shift"):
        super().__init__()
        self.scaling_factor = scaling_factor
        self.block_out_channels = encoder_block_out_channels  # register_to_config(block_out_channels=...)
        self.encoder = Encoder(encoder_in_channels, encoder_out_channels, encoder_block_out_channels,
                               encoder_layers_per_block, encoder_norm_num_groups)
        self.decoder_unet = UNet2DModel(
            in_channels=decoder_in_channels, out_channels=decoder_out_channels,
            block_out_channels=decoder_block_out_channels, layers_per_block=decoder_layers_per_block,
            norm_num_groups=decoder_norm_num_groups, norm_eps=decoder_norm_eps,
            resnet_time_scale_shift=decoder_resnet_time_scale_shift,
            num_train_timesteps=decoder_num_train_timesteps)
        self.decoder_scheduler = ConsistencyDecoderScheduler()
        # persistent here (upstream: persistent=False): see the docstring, the bf16 run only
        self.register_buffer(
            "means", torch.tensor([0.38862467, 0.02253063, 0.07381133, -0.0171294])[None, :, None, None])
        self.register_buffer(
            "stds", torch.tensor([0.9654121, 1.0440036, 0.76147926, 0.77022034])[None, :, None, None])
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1)
        self.use_slicing = False
        self.use_tiling = False

    @property
    def device(self):
        return next(self.parameters()).device

    def encode(self, x):
        h = self.encoder(x)
        moments = self.quant_conv(h)
        # DiagonalGaussianDistribution(moments): mean, logvar = chunk(moments, 2, dim=1); logvar clamped to
        # [-30, 20]; std = exp(0.5 * logvar), var = exp(logvar), made and unused by mode()
        mean, logvar = torch.chunk(moments, 2, dim=1)
        logvar = torch.clamp(logvar, -30.0, 20.0)
        std = torch.exp(0.5 * logvar)  # noqa: F841
        var = torch.exp(logvar)  # noqa: F841
        return mean

    def decode(self, z, noise, step_noise, num_inference_steps=2):
        z = (z * self.scaling_factor - self.means) / self.stds

        scale_factor = 2 ** (len(self.block_out_channels) - 1)
        z = F.interpolate(z, mode="nearest", scale_factor=scale_factor)

        batch_size, _, height, width = z.shape

        self.decoder_scheduler.set_timesteps(num_inference_steps, device=self.device)

        # randn_tensor((batch_size, 3, height, width), generator=generator, dtype=z.dtype, device=z.device)
        assert noise.shape == (batch_size, 3, height, width)
        x_t = self.decoder_scheduler.init_noise_sigma * noise.to(dtype=z.dtype, device=z.device)

        for t in self.decoder_scheduler.timesteps:
            model_input = torch.concat([self.decoder_scheduler.scale_model_input(x_t, t), z], dim=1)
            model_output = self.decoder_unet(model_input, t)[0][:, :3, :, :]
            prev_sample = self.decoder_scheduler.step(model_output, t, x_t, step_noise)
            x_t = prev_sample

        x_0 = x_t
        return x_0

    def forward(self, sample, noise, step_noise):
        x = sample
        z = self.encode(x)  # sample_posterior False (upstream's default): posterior.mode()
        return self.decode(z, noise, step_noise)


def inputs(g):
    # the image, then upstream's two draws from forward's generator, in its order
    sample = torch.randn((1, 3, 12, 12), generator=g)
    noise = torch.randn((1, 3, 12, 12), generator=g)
    step_noise = torch.randn((1, 3, 12, 12), generator=g)
    return {"sample": sample, "noise": noise, "step_noise": step_noise}


if __name__ == "__main__":
    capture_once(
        "consistency_vae", ConsistencyDecoderVAE, inputs, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers consistency_decoder_vae.py, "
                            "scheduling_consistency_decoder.py, unet_2d.py, unet_2d_blocks.py and vae.py's Encoder "
                            "(torch 1.13)",
             note="ConsistencyDecoderVAE at widths 8/16: the KL encoder's posterior mode, the latent normalised by "
                  "per-channel constants (z * 0.18215 - means) / stds (unrecorded buffers) and nearest ×2, then two "
                  "consistency steps t = 1008, 512 of a pixel-space UNet2DModel (learned timestep embedding table, "
                  "scale_shift resnets, resnet down/upsamplers, no attention) on concat(c_in[t] * x_t, z), "
                  "x_0 = c_out[t] * out[:, :3] + c_skip[t] * x_t, re-noised with step_noise between the steps"))
