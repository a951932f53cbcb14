"""unCLIP's (Karlo's) decoder stage: the decoder UNet2DConditionModel as kakaobrain/karlo-v1-alpha configures it and
the UnCLIPTextProjModel that feeds it, under UnCLIPPipeline's classifier-free guidance, reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers:
 - src/diffusers/models/unets/unet_2d_condition.py at 00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f with the decoder's
   configuration (scripts/convert_kakao_brain_unclip_to_diffusers.py's DECODER_CONFIG at
   0080668c54671a0b76efde8ea30bddd08427df85: ResnetDownsampleBlock2D then SimpleCrossAttnDownBlock2D, mid
   UNetMidBlock2DSimpleCrossAttn, SimpleCrossAttnUpBlock2D then ResnetUpsampleBlock2D, class_embed_type "identity",
   attention_head_dim 64, resnet_time_scale_shift "scale_shift", in 3 / out 6 channels; no encoder_hid_proj, no
   addition embedding): the module tree is kandinsky22_decoder.py's model with those slots emptied (encoder_hid_proj
   None, no add_embedding) and class_embedding = nn.Identity (_set_class_embedding "identity"); the forward restated
   here for what this configuration uses beyond kandinsky22_decoder.py: the attention mask made a bias at the top of
   forward ((1 − mask.to(sample.dtype))·−10000, unsqueeze(1)), get_class_embed (class_embedding(class_labels)
   .to(sample.dtype)) added to the timestep embedding, and attention_mask passed to every block with cross-attention;
 - src/diffusers/models/unets/unet_2d_blocks.py at 049ca3822f9eb3621c96c11bba58b8e579cb3cc1: SimpleCrossAttnDownBlock2D,
   UNetMidBlock2DSimpleCrossAttn and SimpleCrossAttnUpBlock2D forwards with their mask choice (attention_mask given:
   `mask = attention_mask`, "to maintain compatibility with UnCLIP"), passed to each attention; the blocks otherwise
   if_unet.py's, their forwards swapped onto the modules it builds (the same tree and parameters);
 - src/diffusers/models/attention_processor.py at 001d4da0eb5809c779120c51f74ef73d6078b08c: AttnAddedKVProcessor2_0 with
   its mask path: Attention.prepare_attention_mask(attention_mask, sequence_length, batch_size, out_dim=4) (the [B, 1,
   4 + L] bias F.pad'ed by (0, target_length) zeros, target_length the map's cell count, so that it covers
   [encoder rows; map cells] as the keys are joined; unsqueeze(1), repeat_interleave(heads, dim=1)) and
   F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask), over if_unet.py's Attention;
 - src/diffusers/pipelines/unclip/text_proj.py (UnCLIPTextProjModel; upstream's current form, with the
   extra tokens permuted to rows and joined on dim 1, as huggingface/diffusers main has it; read from the copy in
   ChrisColeTech/diffusers at 725959a41dab7fe82d92cac23db7f6e469cca971, since the stored upstream version
   1ba2d2d3d8c9757e6c1117cfcd638af01aa938d8 predates that change): with guidance the learned
   classifier-free-guidance embedding expanded and put before the image embedding (batch [cfg, image]); embedding_proj
   of the CLIP text embedding plus clip_image_embeddings_project_to_time_embeddings of the image embedding (the
   additive class embedding); clip_extra_context_tokens_proj of the image embedding reshaped to [B, C, 4] and
   permuted to 4 rows; encoder_hidden_states_proj then text_encoder_hidden_states_norm (LayerNorm) of the text
   encoder's states; cat([4 extra rows, text rows], dim=1);
 - src/diffusers/pipelines/unclip/pipeline_unclip.py at 317ce42147bc22e2fee473c2f1d8ed91b5f6b5f3
   (UnCLIPPipeline.__call__'s decoder stage, decoder_guidance_scale 8.0, its default): _encode_prompt's [uncond,
   prompt] batches (text_embeds, last_hidden_state, the tokenizer masks as bool), then before the decoder loop
   self.text_proj(image_embeddings=, prompt_embeds=, text_encoder_hidden_states=, do_classifier_free_guidance=True)
   and decoder_text_mask = F.pad(text_mask, (clip_extra_context_tokens, 0), value=True); each step
   latent_model_input = cat([latents] * 2), self.decoder(sample=, timestep=t, encoder_hidden_states=,
   class_labels=additive_clip_time_embeddings, attention_mask=decoder_text_mask).sample, then noise_pred.chunk(2),
   each half split(3, dim=1) (the uncond variance dropped), uncond + 8·(text − uncond), cat with the text half's
   predicted variance; UnCLIPScheduler.step (variance_type "learned_range") splits that into model_output and
   predicted_variance by sample.shape[1]: the model_output (first 3 channels) is what this loop takes.
The CLIP text encoder and the prior are not replicated: their outputs (text_embeds, last_hidden_state, the prior's
image embedding) are drawn at random, for the empty uncond prompt too; the tokenizer masks are fixed (5 of 7 tokens
for the prompt, 2 for ""). Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.py's sdpa, its
math path, the float mask added to the scores).

The constructs it shows beyond kandinsky22_decoder.py: a padding mask on the cross rows (additive −10000 bias from a
bool mask, padded with ones for the 4 CLIP tokens in front and with zeros for the map's own cells behind, broadcast
over heads and queries); an identity class embedding: a vector computed by the pipeline outside the UNet (text and
image projections summed, made once before the loop) added to the timestep embedding; the encoder rows built by the
pipeline (4 tokens from the image embedding, strided out of one projection by a reshape and permute, before the
layer-normed text rows); a learned unconditional image embedding prepended to the batch; a batch of two; the CFG
arithmetic on batch halves with each half's channels split (learned variance), the text half's variance re-joined,
then split off by the scheduler.

How it maps into run.py's loop x ← x + (σ_next − σ)·v: t = σ·1000 (f32, 0-dim as a scheduler's timesteps element,
expanded by the UNet to the batch of 2); the guided output's first 3 channels (UnCLIPScheduler's model_output) taken
as the velocity as is.

Tiny config (Karlo: block_out_channels (320, 640, 960, 1280), layers_per_block 3, attention_head_dim 64,
norm_num_groups 32, cross_attention_dim 1536, time_embed_dim 1280, clip_embeddings_dim 768, 77 text tokens, sample
64): block_out_channels (8, 16, 24) (ResnetDownsampleBlock2D and two SimpleCrossAttnDownBlock2D, and back),
layers_per_block 1, attention_head_dim 4 (4 and 6 heads), norm_num_groups 4, cross_attention_dim 16, time_embed_dim
32, clip_embeddings_dim 24, 7 text tokens (4 + 7 = 11 encoder rows, no map's cell count); latents [1, 3, 8, 8] (maps
8, 4, 2).

usage: /usr/bin/python3 bench/unseen/replicas/unclip_decoder_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import if_unet
import kandinsky22_decoder
from run import capture, sdpa


class Attention(if_unet.Attention):
    """if_unet.py's Attention (added_kv_proj_dim, AttnAddedKVProcessor2_0) with the processor's attention_mask path."""

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            # TODO (upstream): for pipelines such as stable-diffusion, padding cross-attn mask: we want to instead pad
            # by (0, remaining_length)
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        # AttnAddedKVProcessor2_0.__call__
        residual = hidden_states
        hidden_states = hidden_states.view(hidden_states.shape[0], hidden_states.shape[1], -1).transpose(1, 2)
        batch_size, sequence_length, _ = hidden_states.shape
        attention_mask = self.prepare_attention_mask(attention_mask, sequence_length, batch_size, out_dim=4)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif self.norm_cross is not None:
            encoder_hidden_states = self.norm_cross(encoder_hidden_states.transpose(1, 2)).transpose(1, 2)
        hidden_states = self.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = self.to_q(hidden_states)
        query = self.head_to_batch_dim(query)
        encoder_hidden_states_key_proj = self.add_k_proj(encoder_hidden_states)
        encoder_hidden_states_value_proj = self.add_v_proj(encoder_hidden_states)
        encoder_hidden_states_key_proj = self.head_to_batch_dim(encoder_hidden_states_key_proj)
        encoder_hidden_states_value_proj = self.head_to_batch_dim(encoder_hidden_states_value_proj)
        key = self.to_k(hidden_states)
        value = self.to_v(hidden_states)
        key = self.head_to_batch_dim(key)
        value = self.head_to_batch_dim(value)
        key = torch.cat([encoder_hidden_states_key_proj, key], dim=2)
        value = torch.cat([encoder_hidden_states_value_proj, value], dim=2)
        # the output of sdp = (batch, num_heads, seq_len, head_dim)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, residual.shape[1])
        # linear proj
        hidden_states = self.to_out[0](hidden_states)
        # dropout
        hidden_states = self.to_out[1](hidden_states)
        hidden_states = hidden_states.transpose(-1, -2).reshape(residual.shape)
        hidden_states = hidden_states + residual
        return hidden_states


def _block_mask(attention_mask, encoder_hidden_states, encoder_attention_mask):
    if attention_mask is None:
        # if encoder_hidden_states is defined: we are doing cross-attn, so we should use cross-attn mask.
        return None if encoder_hidden_states is None else encoder_attention_mask
    # when attention_mask is defined: we don't even check for encoder_attention_mask (UnCLIP's compatibility)
    return attention_mask


class SimpleCrossAttnDownBlock2D(if_unet.SimpleCrossAttnDownBlock2D):
    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                encoder_attention_mask=None):
        output_states = ()
        mask = _block_mask(attention_mask, encoder_hidden_states, encoder_attention_mask)
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, attention_mask=mask)
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states, temb)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock2DSimpleCrossAttn(if_unet.UNetMidBlock2DSimpleCrossAttn):
    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                encoder_attention_mask=None):
        mask = _block_mask(attention_mask, encoder_hidden_states, encoder_attention_mask)
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            # attn
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, attention_mask=mask)
            # resnet
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class SimpleCrossAttnUpBlock2D(if_unet.SimpleCrossAttnUpBlock2D):
    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                upsample_size=None, attention_mask=None, encoder_attention_mask=None):
        mask = _block_mask(attention_mask, encoder_hidden_states, encoder_attention_mask)
        for resnet, attn in zip(self.resnets, self.attentions):
            # resnet
            # pop res hidden states
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, attention_mask=mask)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, temb)
        return hidden_states


_SWAP = {if_unet.Attention: Attention, if_unet.SimpleCrossAttnDownBlock2D: SimpleCrossAttnDownBlock2D,
         if_unet.UNetMidBlock2DSimpleCrossAttn: UNetMidBlock2DSimpleCrossAttn,
         if_unet.SimpleCrossAttnUpBlock2D: SimpleCrossAttnUpBlock2D}


class UNet2DConditionModel(kandinsky22_decoder.UNet2DConditionModel):
    """The unCLIP decoder's configuration of upstream's UNet2DConditionModel over kandinsky22_decoder.py's tree."""

    def __init__(self, in_channels=3, out_channels=6, block_out_channels=(8, 16, 24), layers_per_block=1,
                 cross_attention_dim=16, attention_head_dim=4, norm_num_groups=4, class_embed_type="identity"):
        n = len(block_out_channels)
        super().__init__(in_channels=in_channels, out_channels=out_channels,
                         down_block_types=("ResnetDownsampleBlock2D",) + ("SimpleCrossAttnDownBlock2D",) * (n - 1),
                         mid_block_type="UNetMidBlock2DSimpleCrossAttn",
                         up_block_types=("SimpleCrossAttnUpBlock2D",) * (n - 1) + ("ResnetUpsampleBlock2D",),
                         block_out_channels=block_out_channels, layers_per_block=layers_per_block,
                         norm_num_groups=norm_num_groups, cross_attention_dim=cross_attention_dim,
                         attention_head_dim=attention_head_dim, resnet_time_scale_shift="scale_shift",
                         encoder_hid_dim_type=None, addition_embed_type=None)
        time_embed_dim = block_out_channels[0] * 4
        # _set_encoder_hid_proj (encoder_hid_dim_type None), _set_add_embedding (addition_embed_type None)
        self.encoder_hid_proj = None
        del self.add_embedding
        # _set_class_embedding, "identity"
        assert class_embed_type == "identity"
        self.class_embed_type = class_embed_type
        self.class_embedding = nn.Identity(time_embed_dim, time_embed_dim)
        # the blocks' and attentions' forwards with the mask path (the same modules and parameters)
        for module in self.modules():
            if type(module) in _SWAP:
                module.__class__ = _SWAP[type(module)]

    def get_class_embed(self, sample, class_labels):
        class_emb = None
        if self.class_embedding is not None:
            if class_labels is None:
                raise ValueError("class_labels should be provided when num_class_embeds > 0")
            class_emb = self.class_embedding(class_labels).to(dtype=sample.dtype)
        return class_emb

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, attention_mask=None,
                encoder_attention_mask=None, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                raise NotImplementedError("a sample not a multiple of 2**num_upsamplers")
        # ensure attention_mask is a bias, and give it a singleton query_tokens dimension
        if attention_mask is not None:
            # assume that mask is expressed as: (1 = keep, 0 = discard)
            # convert mask into a bias that can be added to attention scores: (keep = +0, discard = -10000.0)
            attention_mask = (1 - attention_mask.to(sample.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        # convert encoder_attention_mask to a bias the same way we do for attention_mask
        if encoder_attention_mask is not None:
            encoder_attention_mask = (1 - encoder_attention_mask.to(sample.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        # 1. time
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb)
        class_emb = self.get_class_embed(sample=sample, class_labels=class_labels)
        if class_emb is not None:
            emb = emb + class_emb
        # (no addition embedding, no time_embed_act, no encoder_hid_proj)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, if_unet.SimpleCrossAttnDownBlock2D):  # has_cross_attention
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states,
                                                       attention_mask=attention_mask,
                                                       encoder_attention_mask=encoder_attention_mask)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states,
                                attention_mask=attention_mask, encoder_attention_mask=encoder_attention_mask)
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if isinstance(upsample_block, if_unet.SimpleCrossAttnUpBlock2D):  # has_cross_attention
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states, upsample_size=None,
                                        attention_mask=attention_mask,
                                        encoder_attention_mask=encoder_attention_mask)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples)
        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


class UnCLIPTextProjModel(nn.Module):
    def __init__(self, *, clip_extra_context_tokens=4, clip_embeddings_dim=768, time_embed_dim, cross_attention_dim):
        super().__init__()
        self.learned_classifier_free_guidance_embeddings = nn.Parameter(torch.zeros(clip_embeddings_dim))
        # parameters for additional clip time embeddings
        self.embedding_proj = nn.Linear(clip_embeddings_dim, time_embed_dim)
        self.clip_image_embeddings_project_to_time_embeddings = nn.Linear(clip_embeddings_dim, time_embed_dim)
        # parameters for encoder hidden states
        self.clip_extra_context_tokens = clip_extra_context_tokens
        self.clip_extra_context_tokens_proj = nn.Linear(clip_embeddings_dim,
                                                        self.clip_extra_context_tokens * cross_attention_dim)
        self.encoder_hidden_states_proj = nn.Linear(clip_embeddings_dim, cross_attention_dim)
        self.text_encoder_hidden_states_norm = nn.LayerNorm(cross_attention_dim)

    def forward(self, *, image_embeddings, prompt_embeds, text_encoder_hidden_states, do_classifier_free_guidance):
        if do_classifier_free_guidance:
            # Add the classifier free guidance embeddings to the image embeddings
            image_embeddings_batch_size = image_embeddings.shape[0]
            classifier_free_guidance_embeddings = self.learned_classifier_free_guidance_embeddings.unsqueeze(0)
            classifier_free_guidance_embeddings = classifier_free_guidance_embeddings.expand(
                image_embeddings_batch_size, -1)
            image_embeddings = torch.cat([classifier_free_guidance_embeddings, image_embeddings], dim=0)
        # The image embeddings batch size and the text embeddings batch size are equal
        assert image_embeddings.shape[0] == prompt_embeds.shape[0]
        batch_size = prompt_embeds.shape[0]
        # "Specifically, we modify the architecture described in Nichol et al. (2021) by projecting and
        # adding CLIP embeddings to the existing timestep embedding, ...
        time_projected_prompt_embeds = self.embedding_proj(prompt_embeds)
        time_projected_image_embeddings = self.clip_image_embeddings_project_to_time_embeddings(image_embeddings)
        additive_clip_time_embeddings = time_projected_image_embeddings + time_projected_prompt_embeds
        # ... and by projecting CLIP embeddings into four
        # extra tokens of context that are concatenated to the sequence of outputs from the GLIDE text encoder"
        clip_extra_context_tokens = self.clip_extra_context_tokens_proj(image_embeddings)
        clip_extra_context_tokens = clip_extra_context_tokens.reshape(batch_size, -1, self.clip_extra_context_tokens)
        clip_extra_context_tokens = clip_extra_context_tokens.permute(0, 2, 1)
        text_encoder_hidden_states = self.encoder_hidden_states_proj(text_encoder_hidden_states)
        text_encoder_hidden_states = self.text_encoder_hidden_states_norm(text_encoder_hidden_states)
        text_encoder_hidden_states = torch.cat([clip_extra_context_tokens, text_encoder_hidden_states], dim=1)
        return text_encoder_hidden_states, additive_clip_time_embeddings


class UnCLIPDecoderStage(nn.Module):
    """The pipeline's two models of its decoder stage under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.decoder = UNet2DConditionModel()
        # convert_kakao_brain_unclip_to_diffusers.py's text_proj_from_original_config: the decoder's time_embed_dim
        # (block_out_channels[0] * 4) and cross_attention_dim
        self.text_proj = UnCLIPTextProjModel(clip_embeddings_dim=CLIP_DIM, time_embed_dim=8 * 4,
                                             cross_attention_dim=16)


def build():
    return UnCLIPDecoderStage()


DECODER_GUIDANCE_SCALE = 8.0  # UnCLIPPipeline's default
CLIP_DIM = 24  # clip_embeddings_dim (768)
TEXT_LEN = 7  # the tokenizer's model_max_length (77)
PROMPT_TOKENS, UNCOND_TOKENS = 5, 2  # the tokenizer masks' ones: the prompt's tokens with BOS/EOS, and "" (BOS, EOS)
SAMPLE_SIZE = 8  # decoder.config.sample_size (64)


def inputs(g):
    # CLIPTextModelWithProjection's text_embeds and last_hidden_state for the prompt and for ""; the tokenizer's
    # attention masks (bool); the prior's image embedding; prepare_latents (init_noise_sigma 1)
    return {"prompt_embeds": torch.randn((1, CLIP_DIM), generator=g),
            "text_encoder_hidden_states": torch.randn((1, TEXT_LEN, CLIP_DIM), generator=g),
            "text_mask": torch.arange(TEXT_LEN)[None] < PROMPT_TOKENS,
            "negative_prompt_embeds": torch.randn((1, CLIP_DIM), generator=g),
            "uncond_text_encoder_hidden_states": torch.randn((1, TEXT_LEN, CLIP_DIM), generator=g),
            "uncond_text_mask": torch.arange(TEXT_LEN)[None] < UNCOND_TOKENS,
            "image_embeddings": torch.randn((1, CLIP_DIM), generator=g),
            "noise": torch.randn((1, 3, SAMPLE_SIZE, SAMPLE_SIZE), generator=g)}


def prepare(model, c):
    # UnCLIPPipeline.__call__ (num_images_per_prompt 1): _encode_prompt's duplicates and [uncond, prompt] batches;
    # after the prior, the decoder stage's work before its loop: text_proj and the decoder's text mask
    num_images_per_prompt, batch_size = 1, 1
    prompt_embeds = c["prompt_embeds"].repeat_interleave(num_images_per_prompt, dim=0)
    text_encoder_hidden_states = c["text_encoder_hidden_states"].repeat_interleave(num_images_per_prompt, dim=0)
    text_mask = c["text_mask"].repeat_interleave(num_images_per_prompt, dim=0)
    negative_prompt_embeds = c["negative_prompt_embeds"]
    seq_len = negative_prompt_embeds.shape[1]
    negative_prompt_embeds = negative_prompt_embeds.repeat(1, num_images_per_prompt)
    negative_prompt_embeds = negative_prompt_embeds.view(batch_size * num_images_per_prompt, seq_len)
    uncond_text_encoder_hidden_states = c["uncond_text_encoder_hidden_states"]
    seq_len = uncond_text_encoder_hidden_states.shape[1]
    uncond_text_encoder_hidden_states = uncond_text_encoder_hidden_states.repeat(1, num_images_per_prompt, 1)
    uncond_text_encoder_hidden_states = uncond_text_encoder_hidden_states.view(
        batch_size * num_images_per_prompt, seq_len, -1)
    uncond_text_mask = c["uncond_text_mask"].repeat_interleave(num_images_per_prompt, dim=0)
    prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])
    text_encoder_hidden_states = torch.cat([uncond_text_encoder_hidden_states, text_encoder_hidden_states])
    text_mask = torch.cat([uncond_text_mask, text_mask])
    # decoder
    text_encoder_hidden_states, additive_clip_time_embeddings = model.text_proj(
        image_embeddings=c["image_embeddings"], prompt_embeds=prompt_embeds,
        text_encoder_hidden_states=text_encoder_hidden_states, do_classifier_free_guidance=True)
    c["decoder_text_encoder_hidden_states"] = text_encoder_hidden_states
    c["additive_clip_time_embeddings"] = additive_clip_time_embeddings
    c["decoder_text_mask"] = F.pad(text_mask, (model.text_proj.clip_extra_context_tokens, 0), value=True)


def call(model, decoder_latents, sigma, c):
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=decoder_latents.device)
    # expand the latents if we are doing classifier free guidance
    latent_model_input = torch.cat([decoder_latents] * 2)
    noise_pred = model.decoder(sample=latent_model_input, timestep=t,
                               encoder_hidden_states=c["decoder_text_encoder_hidden_states"],
                               class_labels=c["additive_clip_time_embeddings"],
                               attention_mask=c["decoder_text_mask"])[0]  # .sample
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    noise_pred_uncond, _ = noise_pred_uncond.split(latent_model_input.shape[1], dim=1)
    noise_pred_text, predicted_variance = noise_pred_text.split(latent_model_input.shape[1], dim=1)
    noise_pred = noise_pred_uncond + DECODER_GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)
    noise_pred = torch.cat([noise_pred, predicted_variance], dim=1)
    # UnCLIPScheduler.step, variance_type "learned_range": model_output, predicted_variance = torch.split(
    # model_output, sample.shape[1], dim=1)
    model_output, predicted_variance = torch.split(noise_pred, decoder_latents.shape[1], dim=1)
    return model_output


PRODUCER = dict(
    library_source="replica of huggingface/diffusers UnCLIPPipeline's decoder stage (pipeline_unclip.py@317ce42147bc, "
                   "unclip/text_proj.py's UnCLIPTextProjModel) on unet_2d_condition.py@00f354d14d00 in Karlo's decoder "
                   "configuration (class_embed_type identity; the blocks of kandinsky22_decoder.py / if_unet.py with "
                   "unet_2d_blocks.py@049ca3822f9e's mask path and AttnAddedKVProcessor2_0's attention mask, "
                   "attention_processor.py@001d4da0eb58; torch 1.13)",
    timestep="sigma*1000, f32 0-dim (the scheduler's t), expanded by the UNet to the batch of 2",
    velocity="chunk(2) of the output, each half split(3, dim=1); uncond + 8·(text − uncond); cat with the text half's "
             "variance; UnCLIPScheduler's split(3): the first 3 channels, as is",
    note="Karlo's decoder UNet2DConditionModel at widths 8/16/24 (ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D "
         "x2, UNetMidBlock2DSimpleCrossAttn, SimpleCrossAttnUpBlock2D x2, ResnetUpsampleBlock2D; SiLU scale_shift "
         "resnets; AttnAddedKVProcessor2_0 with an additive −10000 padding mask over [4 CLIP rows, 7 text rows, map "
         "cells]); class_labels = UnCLIPTextProjModel's additive embedding (text + image projections) through "
         "nn.Identity into the time embedding; encoder rows = 4 tokens from the image embedding (reshape [B, C, 4], "
         "permute) + layer-normed projected text; batch [learned cfg image embedding / uncond text, image / prompt]; "
         "text_proj called once before the loop (keys pre/...); guidance scale 8 with learned-variance channel splits")

if __name__ == "__main__":
    capture("unclip_decoder_unet", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
