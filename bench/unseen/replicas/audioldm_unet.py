"""AudioLDM's U-Net (UNet2DConditionModel as cvssp/audioldm configures it, the first AudioLDM: AudioLDMPipeline), with
the classifier-free guidance AudioLDMPipeline runs around it, reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with AudioLDM's configuration: class_embed_type
"simple_projection" (_set_class_embedding: class_embedding = nn.Linear(projection_class_embeddings_input_dim,
time_embed_dim), registered after time_embedding; get_class_embed: class_emb = self.class_embedding(class_labels)
.to(dtype=sample.dtype), the labels projected with no sinusoid and no activation) with class_embeddings_concat True
(forward: emb = torch.cat([emb, class_emb], dim=-1); __init__: blocks_time_embed_dim = time_embed_dim * 2, so every
resnet's time_emb_proj reads the joined 2·time_embed_dim vector); cross_attention_dim one per level equal to that
level's width (the conversion script, scripts/convert_original_audioldm_to_diffusers.py, sets cross_attention_dim =
block_out_channels when the original config has none, as AudioLDM's has not: it conditions by FiLM only; the
pipeline's fast test, tests/pipelines/audioldm/test_audioldm.py at 0356e18b09909d625e4cff5ac8e008719d9cb77c, builds
its dummy with cross_attention_dim (32, 64) = its block_out_channels) and encoder_hidden_states=None from the
pipeline: every BasicTransformerBlock's attn2 is then called with no encoder states, so it attends to the map's own
cells with its own projections (to_k / to_v as wide as the level: cross_attention_dim cannot be None for a
CrossAttnDownBlock2D, whose get_down_block raises "cross_attention_dim must be specified"); so the attention blocks
are self-only, two self-attentions a transformer block. Otherwise the defaults: time_embedding_type "positional"
(Timesteps(block_out_channels[0], flip_sin_to_cos True, shift 0), TimestepEmbedding Linear-SiLU-Linear, no cond_proj),
no addition / encoder_hid embedding, time_embedding_act_fn None, mid block UNetMidBlock2DCrossAttn, conv_norm_out
GroupNorm-SiLU-conv_out 3x3, no masks, upsample_size None (the latent a multiple of 4). The blocks are sd_unet.py's
(unets/unet_2d_blocks.py at 049ca3822f9eb3621c96c11bba58b8e579cb3cc1: DownBlock2D, CrossAttnDownBlock2D,
UNetMidBlock2DCrossAttn, CrossAttnUpBlock2D, UpBlock2D; transformers/transformer_2d.py with 1x1 conv proj_in /
proj_out (use_linear_projection False); attention.py's BasicTransformerBlock (norm_type "layer_norm", GEGLU
FeedForward) and attention_processor.py's Attention with AttnProcessor2_0, q/k/v without bias; resnet.py's
ResnetBlock2D "default"; Downsample2D conv stride 2 padding 1; Upsample2D nearest ×2 then conv), imported unchanged:
none of them is AudioLDM-specific, the per-level cross_attention_dim is only each block's `cross` argument. Timesteps /
TimestepEmbedding are parts.py's (embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b). The model's __init__
and forward are written here, after sdxl_unet.py's (the same upstream file). The same module tree, parameter names
and shapes, call boundaries and arithmetic. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its
math path, in sd_unet.py's Attention).

Pipeline as AudioLDMPipeline (src/diffusers/pipelines/audioldm/pipeline_audioldm.py at
9345e0ece3c2adf0b6a870245c87834ce922d7cc) calls it with its defaults (guidance_scale 2.5, so classifier-free guidance;
negative_prompt None: the empty prompt "", num_waveforms_per_prompt 1). _encode_prompt (before the loop: prepare):
prompt_embeds = the CLAP text model's text_embeds (ClapTextModelWithProjection: one projected vector per prompt, here
drawn at random, [1, 24]), then F.normalize(prompt_embeds, dim=-1) ("additional L_2 normalization over each
hidden-state"), .to(dtype=text_encoder.dtype) (so bf16 in the bf16 run, where the request inputs are bf16),
.repeat(1, 1).view(1, 24); the same for "" (negative_prompt_embeds, F.normalize, .to, repeat, view); then prompt_embeds
= torch.cat([negative_prompt_embeds, prompt_embeds]) [2, 24]. Each step (call): latent_model_input =
torch.cat([latents] * 2); scheduler.scale_model_input is the identity (DDIMScheduler, cvssp/audioldm's scheduler);
self.unet(latent_model_input, t, encoder_hidden_states=None, class_labels=prompt_embeds,
cross_attention_kwargs=None).sample; chunk(2); noise_pred_uncond + 2.5 · (noise_pred_text − noise_pred_uncond). t the
scheduler's timestep, a 0-d tensor: here σ·1000 in f32 (as sd_unet.py and audioldm2_unet.py take it; DDIM's are
integers), [None] then expanded to the batch by get_time_embed; the guided noise prediction is taken as the velocity as
is (run.py's 3-step flow-matching Euler loop, not the pipeline's DDIM step). prepare_latents' latents ·
init_noise_sigma (1.0 for DDIM) is left to run.py's noise.

The constructs it shows: the conditioning a single vector per sample (no sequence), L2-normalised before the loop,
entering only through the time embedding: a Linear projection joined by concatenation (not a sum) to the timestep
embedding, so that every resnet's time projection reads [temb, class_emb]; attention blocks with no cross-attention
at all (both attentions of each transformer block attend to the map's own cells); classifier-free guidance whose two
halves differ only in that vector (the negative prompt's normalised embedding); a tall, narrow 8-channel latent (time
by mel bins).

Tiny config (cvssp/audioldm's unet: block_out_channels (128, 256, 384, 640), layers_per_block 2, down (DownBlock2D,
CrossAttnDownBlock2D ×3), up (CrossAttnUpBlock2D ×3, UpBlock2D), cross_attention_dim = block_out_channels,
projection_class_embeddings_input_dim 512 (CLAP's projection), in_channels = out_channels 8, norm_num_groups 32; the
fast test's dummy: (32, 64), DownBlock2D / CrossAttnDownBlock2D, cross_attention_dim (32, 64), input dim 32):
block_out_channels (8, 16, 32), down (DownBlock2D, CrossAttnDownBlock2D, CrossAttnDownBlock2D), up
(CrossAttnUpBlock2D, CrossAttnUpBlock2D, UpBlock2D), cross_attention_dim (8, 16, 32), layers_per_block 1 (two resnets
an up block, as sd_unet.py's blocks build them), attention_head_dim 2 (read as the head count: heads of width 8 at
level 1, 16 at level 2 and in the mid block), norm_num_groups 4, projection_class_embeddings_input_dim 24,
time_embed_dim 32 (blocks read 64), in_channels = out_channels 8; latents [1, 8, 8, 4] (8 time frames by 4 mel bins;
maps of 8x4, 4x2, 2x1), the U-Net's input [2, 8, 8, 4]. 4.6 MB in f32 (957 captured calls).

usage: /usr/bin/python3 bench/unseen/replicas/audioldm_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D


class UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=8, out_channels=8, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
                 block_out_channels=(8, 16, 32), norm_num_groups=4, norm_eps=1e-5, cross_attention_dim=(8, 16, 32),
                 attention_head_dim=2, use_linear_projection=False, class_embed_type="simple_projection",
                 projection_class_embeddings_input_dim=24, class_embeddings_concat=True):
        super().__init__()
        # upstream: num_attention_heads = num_attention_heads or attention_head_dim (the naming issue)
        num_attention_heads = attention_head_dim
        self.class_embed_type = class_embed_type
        self.class_embeddings_concat = class_embeddings_concat
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time (_set_time_proj, "positional")
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.encoder_hid_proj = None
        # class embedding (_set_class_embedding, "simple_projection")
        assert class_embed_type == "simple_projection"
        self.class_embedding = nn.Linear(projection_class_embeddings_input_dim, time_embed_dim)
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(num_attention_heads, int):
            num_attention_heads = (num_attention_heads,) * len(down_block_types)
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,) * len(down_block_types)
        if class_embeddings_concat:
            # The time embeddings are concatenated with the class embeddings. The dimension of the
            # time embeddings passed to the down, middle, and up blocks is twice the dimension of the
            # regular time embeddings
            blocks_time_embed_dim = time_embed_dim * 2
        else:
            blocks_time_embed_dim = time_embed_dim

        # down (layers_per_block 1: one resnet a down block, as sd_unet.py's blocks build them)
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlock2D":
                if cross_attention_dim[i] is None:
                    raise ValueError("cross_attention_dim must be specified for CrossAttnDownBlock2D")
                down_block = CrossAttnDownBlock2D(input_channel, output_channel, blocks_time_embed_dim,
                                                  num_attention_heads[i], cross_attention_dim[i], norm_num_groups,
                                                  not is_final_block, use_linear_projection, 1)
            else:
                down_block = DownBlock2D(input_channel, output_channel, blocks_time_embed_dim, norm_num_groups,
                                         not is_final_block)
            self.down_blocks.append(down_block)

        # mid
        self.mid_block = UNetMidBlock2DCrossAttn(block_out_channels[-1], blocks_time_embed_dim,
                                                 num_attention_heads[-1], cross_attention_dim[-1], norm_num_groups,
                                                 use_linear_projection, 1)

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up (reversed_layers_per_block[i] + 1 = 2 resnets an up block)
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        reversed_cross_attention_dim = list(reversed(cross_attention_dim))
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
            if up_block_type == "CrossAttnUpBlock2D":
                if reversed_cross_attention_dim[i] is None:
                    raise ValueError("cross_attention_dim must be specified for CrossAttnUpBlock2D")
                up_block = CrossAttnUpBlock2D(input_channel, prev_output_channel, output_channel,
                                              blocks_time_embed_dim, reversed_num_attention_heads[i],
                                              reversed_cross_attention_dim[i], norm_num_groups, add_upsample,
                                              use_linear_projection, 1, 2)
            else:
                up_block = UpBlock2D(input_channel, prev_output_channel, output_channel, blocks_time_embed_dim,
                                     norm_num_groups, add_upsample, 2)
            self.up_blocks.append(up_block)

        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups,
                                          eps=norm_eps)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    def get_time_embed(self, sample, timestep):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        # `Timesteps` does not contain any weights and will always return f32 tensors
        # but time_embedding might actually be running in fp16. so we need to cast here.
        t_emb = t_emb.to(dtype=sample.dtype)
        return t_emb

    def get_class_embed(self, sample, class_labels):
        class_emb = None
        if self.class_embedding is not None:
            if class_labels is None:
                raise ValueError("class_labels should be provided when num_class_embeds > 0")
            # class_embed_type "simple_projection": no time_proj of the labels
            class_emb = self.class_embedding(class_labels).to(dtype=sample.dtype)
        return class_emb

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, added_cond_kwargs=None, return_dict=True):
        default_overall_up_factor = 2 ** self.num_upsamplers
        # upsample size should be forwarded when sample is not a multiple of `default_overall_up_factor`
        forward_upsample_size = False
        upsample_size = None
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        # 1. time (time_embedding has no cond_proj: timestep_cond unused)
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb)
        class_emb = self.get_class_embed(sample=sample, class_labels=class_labels)
        if class_emb is not None:
            if self.class_embeddings_concat:
                emb = torch.cat([emb, class_emb], dim=-1)
            else:
                emb = emb + class_emb
        # (no addition embedding, time_embed_act or encoder_hid_proj)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            # if we have not reached the final block and need to forward the upsample size, we do it here
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if isinstance(upsample_block, CrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states, upsample_size=upsample_size)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size)
        # 6. post-process
        if self.conv_norm_out:
            sample = self.conv_norm_out(sample)
            sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


def build():
    return UNet2DConditionModel()


GUIDANCE_SCALE = 2.5  # AudioLDMPipeline.__call__'s default
NUM_WAVEFORMS_PER_PROMPT = 1
CLAP_DIM = 24  # ClapTextModelWithProjection's projection_dim (512), as projection_class_embeddings_input_dim


def inputs(g):
    # the CLAP text model's text_embeds of the prompt and of the empty negative prompt, before the pipeline's
    # F.normalize; the latents: 8 channels, time frames by mel bins
    return {"text_embeds": torch.randn((1, CLAP_DIM), generator=g),
            "negative_text_embeds": torch.randn((1, CLAP_DIM), generator=g),
            "noise": torch.randn((1, 8, 8, 4), generator=g)}


def prepare(model, c):
    # AudioLDMPipeline._encode_prompt with classifier-free guidance (guidance_scale 2.5 > 1)
    text_encoder_dtype = c["text_embeds"].dtype  # the text encoder's dtype, as its text_embeds come out
    prompt_embeds = c["text_embeds"]
    batch_size = prompt_embeds.shape[0]
    # additional L_2 normalization over each hidden-state
    prompt_embeds = F.normalize(prompt_embeds, dim=-1)
    prompt_embeds = prompt_embeds.to(dtype=text_encoder_dtype)
    (bs_embed, seq_len) = prompt_embeds.shape
    # duplicate text embeddings for each generation per prompt, using mps friendly method
    prompt_embeds = prompt_embeds.repeat(1, NUM_WAVEFORMS_PER_PROMPT)
    prompt_embeds = prompt_embeds.view(bs_embed * NUM_WAVEFORMS_PER_PROMPT, seq_len)
    negative_prompt_embeds = c["negative_text_embeds"]
    # additional L_2 normalization over each hidden-state
    negative_prompt_embeds = F.normalize(negative_prompt_embeds, dim=-1)
    # duplicate unconditional embeddings for each generation per prompt, using mps friendly method
    seq_len = negative_prompt_embeds.shape[1]
    negative_prompt_embeds = negative_prompt_embeds.to(dtype=text_encoder_dtype)
    negative_prompt_embeds = negative_prompt_embeds.repeat(1, NUM_WAVEFORMS_PER_PROMPT)
    negative_prompt_embeds = negative_prompt_embeds.view(batch_size * NUM_WAVEFORMS_PER_PROMPT, seq_len)
    # For classifier free guidance, we need to do two forward passes.
    # Here we concatenate the unconditional and text embeddings into a single batch
    c["prompt_embeds"] = torch.cat([negative_prompt_embeds, prompt_embeds])


def call(model, x, sigma, c):
    # expand the latents if we are doing classifier free guidance; DDIM's scale_model_input is the identity
    latent_model_input = torch.cat([x] * 2)
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    # predict the noise residual
    noise_pred = model(latent_model_input, t, encoder_hidden_states=None, class_labels=c["prompt_embeds"],
                       cross_attention_kwargs=None, return_dict=False)[0]
    # perform guidance
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    return noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py@00f354d14d00 (AudioLDM configuration: "
                   "class_embed_type simple_projection, class_embeddings_concat) with sd_unet.py's blocks, and "
                   "pipeline_audioldm.py@9345e0ece3c2 (torch 1.13)",
    timestep="sigma*1000, f32 0-d (AudioLDMPipeline: the scheduler's t), expanded to the guided batch of 2",
    velocity="uncond + 2.5*(text - uncond) of the noise prediction halves, as is",
    note="AudioLDM's UNet2DConditionModel at widths 8/16/32 on an 8-channel 8x4 latent: DownBlock2D, two "
         "CrossAttnDownBlock2D, UNetMidBlock2DCrossAttn, two CrossAttnUpBlock2D, UpBlock2D; encoder_hidden_states "
         "None, so every transformer block's attn2 (to_k/to_v as wide as the level) self-attends like attn1; the "
         "CLAP text_embeds [1, 24] and the negative's, F.normalize'd before the loop and joined [negative, prompt], "
         "enter as class_labels: class_embedding Linear(24 -> 32) concatenated after the time embedding (32) so "
         "every resnet's time_emb_proj reads 64; classifier-free guidance 2.5")

if __name__ == "__main__":
    capture("audioldm_unet", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
