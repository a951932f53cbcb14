"""UniDiffuser's joint noise-prediction network (UniDiffuserModel around UTransformer2DModel, a U-ViT), reimplemented
for torch 1.13 (no diffusers here), captured small in f32 on CPU in text-to-image mode.

Follows huggingface/diffusers src/diffusers/pipelines/unidiffuser/modeling_uvit.py at
5e43f2412e7b7b3e1b9ca4e12816a2ba24fd537e line for line (its own PatchEmbed and SkipBlock, UniDiffuserBlock,
UTransformer2DModel, UniDiffuserModel) with the configuration of thu-ml/unidiffuser-v1 (convert_from_ckpt.py's
create_unidiffuser_unet_config_big with version 1: block_type "unidiffuser", pre_layer_norm False, activation_fn
"gelu", attention_bias False, cross_attention_dim None, norm_type "layer_norm" (num_embeds_ada_norm 1000 is passed
but unused: AdaLayerNorm only for norm_type "ada_norm"), norm_elementwise_affine True, use_timestep_embedding False
(the timestep tokens are the raw sinusoids, through nn.Identity), use_patch_pos_embed False, ff_final_dropout True,
use_data_type_embedding True), and the parts it imports: attention_processor.py (Attention(query_dim, heads,
dim_head, bias=False) with AttnProcessor2_0: sd_unet.py's Attention, imported), attention.py (FeedForward with
activation_fn "gelu" and final_dropout: [GELU, Dropout, Linear, Dropout]), activations.py (GELU: a Linear, then
exact F.gelu: parts.py's GELU, imported) and embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b (Timesteps
with flip_sin_to_cos, shift 0: parts.py's). The same module tree, parameter names and shapes (the unused
transformer.pos_embed PatchEmbed too: UniDiffuserModel feeds the transformer embeddings, hidden_states_is_embedding
True), call boundaries and arithmetic. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.py's
sdpa, its math path, no mask).

The constructs it shows: one self-attention sequence of six kinds of token joined in order [image timestep, text
timestep, data type, text rows, CLIP image row, VAE latent patches], each from its own embedding (two sinusoidal
timesteps as tokens with no MLP, an nn.Embedding of an int32 id, two Linears, a 2x2 stride-2 patch convolution);
a learned position table with the data-type position spliced in after the two timestep rows (torch.cat of slices
of one parameter and a second parameter); post-LayerNorm blocks with the LayerNorms on the residual backbone
(x = norm1(x + attn(x)); x = norm3(x + ff(x))); U-ViT long skips (each in-block's output pushed, popped LIFO by the
out-blocks: Linear(cat[x, skip]) then LayerNorm); the output split back by kind and three output heads, the VAE
rows unpatchified through einsum "nhwpqc->nchpwq"; the text head computed but not read in this mode.

Pipeline as UniDiffuserPipeline (pipeline_unidiffuser.py at d3ece688f5cb9cb935ba4b1cebc66a40c5a866a6) calls it in
mode "text2img" without guidance (guidance_scale <= 1: _get_noise_pred returns img_out): the sampler's latents are
one flat vector, _combine(image_vae_latents [1, 4, 8, 8], image_clip_latents [1, 1, 12]) = [1, 4·8·8 + 12]; each step
_split gives them back (reshape), self.unet(img_vae_latents, img_clip_latents, prompt_embeds, timestep_img=t,
timestep_text=0, data_type=data_type) with data_type 1 (the default: UniDiffuser-v1's data type embedding; the int
becomes torch.tensor([1], dtype=torch.int)) and timestep_text the int 0 (torch.tensor([0], dtype=torch.long)); the
image outputs joined by _combine are the noise prediction, taken as the velocity as is (the capture's flow Euler
loop, as sd_unet.py); t the scheduler's (here σ·1000, f32 [1], as sd_unet.py); prompt_embeds the CLIP text states
reduced by text_decoder.encode to text_dim (here [1, 6, 8], drawn at random).

Tiny config: text_dim 8 (64), clip_img_dim 12 (512), num_text_tokens 6 (77), num_attention_heads 2 (24),
attention_head_dim 8 (64): width 16 (1536), num_layers 6 (30): 3 in-blocks, a mid block, 3 out-blocks (15, 1, 15),
in/out_channels 4, sample_size 8 (64), patch_size 2; 1 + 1 + 1 + 6 + 1 + 16 = 26 tokens.

usage: /usr/bin/python3 bench/unseen/replicas/unidiffuser.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from parts import GELU, Timesteps
from run import capture
from sd_unet import Attention


class FeedForward(nn.Module):
    """attention.py's FeedForward(dim, dropout, activation_fn="gelu", final_dropout): GELU (Linear, exact gelu),
    Dropout, Linear, and with final_dropout one more Dropout."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, final_dropout=False, bias=True):
        super().__init__()
        inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        act_fn = GELU(dim, inner_dim, bias=bias)
        self.net = nn.ModuleList([])
        self.net.append(act_fn)
        self.net.append(nn.Dropout(dropout))
        self.net.append(nn.Linear(inner_dim, dim_out, bias=bias))
        if final_dropout:
            self.net.append(nn.Dropout(dropout))

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class PatchEmbed(nn.Module):
    """modeling_uvit.py's own PatchEmbed (use_pos_embed False here: no table)."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, layer_norm=False,
                 flatten=True, bias=True, use_pos_embed=True):
        super().__init__()
        self.flatten = flatten
        self.layer_norm = layer_norm
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        if layer_norm:
            self.norm = nn.LayerNorm(embed_dim, elementwise_affine=False, eps=1e-6)
        else:
            self.norm = None
        self.use_pos_embed = use_pos_embed
        if self.use_pos_embed:
            raise NotImplementedError("use_patch_pos_embed: UniDiffuser's configs leave it off")

    def forward(self, latent):
        latent = self.proj(latent)
        if self.flatten:
            latent = latent.flatten(2).transpose(1, 2)  # BCHW -> BNC
        if self.layer_norm:
            latent = self.norm(latent)
        return latent


class SkipBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.skip_linear = nn.Linear(2 * dim, dim)
        # Use torch.nn.LayerNorm for now, following the original code
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, skip):
        x = self.skip_linear(torch.cat([x, skip], dim=-1))
        x = self.norm(x)
        return x


class UniDiffuserBlock(nn.Module):
    """BasicTransformerBlock with the LayerNorms on the residual backbone; pre_layer_norm False (post-LN), no
    cross-attention (cross_attention_dim None: attn2 and norm2 None), norm_type "layer_norm"."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 activation_fn="geglu", attention_bias=False, norm_elementwise_affine=True, pre_layer_norm=False,
                 final_dropout=True):
        super().__init__()
        if cross_attention_dim is not None or activation_fn != "gelu" or attention_bias:
            raise NotImplementedError("the UniDiffuser configuration only")
        self.pre_layer_norm = pre_layer_norm
        # 1. Self-Attn
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim)
        # 2. Cross-Attn
        self.attn2 = None
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine)
        self.norm2 = None
        # 3. Feed-forward
        self.norm3 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine)
        self.ff = FeedForward(dim, dropout=dropout, final_dropout=final_dropout)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, cross_attention_kwargs=None, class_labels=None):
        # Pre-LayerNorm
        if self.pre_layer_norm:
            hidden_states = self.norm1(hidden_states)
        # 1. Self-Attention
        attn_output = self.attn1(hidden_states, encoder_hidden_states=None, attention_mask=attention_mask)
        hidden_states = attn_output + hidden_states
        # Post-LayerNorm
        if not self.pre_layer_norm:
            hidden_states = self.norm1(hidden_states)
        # (attn2 is None)
        # 3. Feed-forward
        if self.pre_layer_norm:
            hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(hidden_states)
        hidden_states = ff_output + hidden_states
        # Post-LayerNorm
        if not self.pre_layer_norm:
            hidden_states = self.norm3(hidden_states)
        return hidden_states


class UTransformer2DModel(nn.Module):
    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, out_channels=None,
                 num_layers=1, dropout=0.0, cross_attention_dim=None, attention_bias=False, sample_size=None,
                 patch_size=2, activation_fn="geglu", pre_layer_norm=False, norm_elementwise_affine=True,
                 use_patch_pos_embed=False, ff_final_dropout=False):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim
        inner_dim = num_attention_heads * attention_head_dim
        self.height = sample_size
        self.width = sample_size
        self.patch_size = patch_size
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                    in_channels=in_channels, embed_dim=inner_dim, use_pos_embed=use_patch_pos_embed)
        block = dict(dropout=dropout, cross_attention_dim=cross_attention_dim, activation_fn=activation_fn,
                     attention_bias=attention_bias, pre_layer_norm=pre_layer_norm,
                     norm_elementwise_affine=norm_elementwise_affine, final_dropout=ff_final_dropout)
        self.transformer_in_blocks = nn.ModuleList([
            UniDiffuserBlock(inner_dim, num_attention_heads, attention_head_dim, **block)
            for d in range(num_layers // 2)])
        self.transformer_mid_block = UniDiffuserBlock(inner_dim, num_attention_heads, attention_head_dim, **block)
        # For each skip connection, we use a SkipBlock (concatenation + Linear + LayerNorm) to process the inputs
        # before each transformer out_block.
        self.transformer_out_blocks = nn.ModuleList([
            nn.ModuleDict({"skip": SkipBlock(inner_dim),
                           "block": UniDiffuserBlock(inner_dim, num_attention_heads, attention_head_dim, **block)})
            for d in range(num_layers // 2)])
        self.out_channels = in_channels if out_channels is None else out_channels
        # Following the UniDiffuser U-ViT implementation, we process the transformer output with
        # a LayerNorm layer with per-element affine params
        self.norm_out = nn.LayerNorm(inner_dim)

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, class_labels=None,
                cross_attention_kwargs=None, return_dict=True, hidden_states_is_embedding=False, unpatchify=True):
        if not unpatchify and return_dict:
            raise ValueError("Cannot both define `unpatchify` and `return_dict`")
        # 1. Input
        if not hidden_states_is_embedding:
            hidden_states = self.pos_embed(hidden_states)
        # 2. Blocks
        # In ("downsample") blocks
        skips = []
        for in_block in self.transformer_in_blocks:
            hidden_states = in_block(hidden_states, encoder_hidden_states=encoder_hidden_states, timestep=timestep,
                                     cross_attention_kwargs=cross_attention_kwargs, class_labels=class_labels)
            skips.append(hidden_states)
        # Mid block
        hidden_states = self.transformer_mid_block(hidden_states)
        # Out ("upsample") blocks
        for out_block in self.transformer_out_blocks:
            hidden_states = out_block["skip"](hidden_states, skips.pop())
            hidden_states = out_block["block"](hidden_states, encoder_hidden_states=encoder_hidden_states,
                                               timestep=timestep, cross_attention_kwargs=cross_attention_kwargs,
                                               class_labels=class_labels)
        # 3. Output
        hidden_states = self.norm_out(hidden_states)
        if unpatchify:
            height = width = int(hidden_states.shape[1] ** 0.5)
            hidden_states = hidden_states.reshape(
                shape=(-1, height, width, self.patch_size, self.patch_size, self.out_channels))
            hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
            output = hidden_states.reshape(
                shape=(-1, self.out_channels, height * self.patch_size, width * self.patch_size))
        else:
            output = hidden_states
        if not return_dict:
            return (output,)
        return {"sample": output}


class UniDiffuserModel(nn.Module):
    def __init__(self, text_dim=768, clip_img_dim=512, num_text_tokens=77, num_attention_heads=16,
                 attention_head_dim=88, in_channels=None, out_channels=None, num_layers=1, dropout=0.0,
                 cross_attention_dim=None, attention_bias=False, sample_size=None, patch_size=None,
                 activation_fn="geglu", pre_layer_norm=False, use_timestep_embedding=False,
                 norm_elementwise_affine=True, use_patch_pos_embed=False, ff_final_dropout=True,
                 use_data_type_embedding=False):
        super().__init__()
        # 0. Handle dimensions
        self.inner_dim = num_attention_heads * attention_head_dim
        assert sample_size is not None, "UniDiffuserModel over patched input must provide sample_size"
        self.sample_size = sample_size
        self.in_channels = in_channels
        self.out_channels = in_channels if out_channels is None else out_channels
        self.patch_size = patch_size
        # Assume image is square...
        self.num_patches = (self.sample_size // patch_size) * (self.sample_size // patch_size)
        # 1.1 Input layers for text and image input
        self.vae_img_in = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                     in_channels=in_channels, embed_dim=self.inner_dim,
                                     use_pos_embed=use_patch_pos_embed)
        self.clip_img_in = nn.Linear(clip_img_dim, self.inner_dim)
        self.text_in = nn.Linear(text_dim, self.inner_dim)
        # 1.2. Timestep embeddings for t_img, t_text
        if use_timestep_embedding:
            raise NotImplementedError("use_timestep_embedding: UniDiffuser's configs leave it off")
        self.timestep_img_proj = Timesteps(self.inner_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_img_embed = nn.Identity()
        self.timestep_text_proj = Timesteps(self.inner_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_text_embed = nn.Identity()
        # 1.3. Positional embedding
        self.num_text_tokens = num_text_tokens
        self.num_tokens = 1 + 1 + num_text_tokens + 1 + self.num_patches
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_tokens, self.inner_dim))
        self.pos_embed_drop = nn.Dropout(p=dropout)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        # 1.4. Handle data type token embeddings for UniDiffuser-V1, if necessary
        self.use_data_type_embedding = use_data_type_embedding
        if self.use_data_type_embedding:
            self.data_type_token_embedding = nn.Embedding(2, self.inner_dim)
            self.data_type_pos_embed_token = nn.Parameter(torch.zeros(1, 1, self.inner_dim))
        # 2. Define transformer blocks
        self.transformer = UTransformer2DModel(
            num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim, in_channels=in_channels,
            out_channels=out_channels, num_layers=num_layers, dropout=dropout,
            cross_attention_dim=cross_attention_dim, attention_bias=attention_bias, sample_size=sample_size,
            patch_size=patch_size, activation_fn=activation_fn, pre_layer_norm=pre_layer_norm,
            norm_elementwise_affine=norm_elementwise_affine, use_patch_pos_embed=use_patch_pos_embed,
            ff_final_dropout=ff_final_dropout)
        # 3. Define output layers
        patch_dim = (patch_size ** 2) * out_channels
        self.vae_img_out = nn.Linear(self.inner_dim, patch_dim)
        self.clip_img_out = nn.Linear(self.inner_dim, clip_img_dim)
        self.text_out = nn.Linear(self.inner_dim, text_dim)

    @property
    def dtype(self):
        # ModelMixin.dtype: the parameters' dtype
        return next(self.parameters()).dtype

    def forward(self, latent_image_embeds, image_embeds, prompt_embeds, timestep_img, timestep_text, data_type=1,
                encoder_hidden_states=None, cross_attention_kwargs=None):
        batch_size = latent_image_embeds.shape[0]
        # 1.1. Map inputs to shape (B, N, inner_dim)
        vae_hidden_states = self.vae_img_in(latent_image_embeds)
        clip_hidden_states = self.clip_img_in(image_embeds)
        text_hidden_states = self.text_in(prompt_embeds)
        num_text_tokens, num_img_tokens = text_hidden_states.size(1), vae_hidden_states.size(1)
        # 1.2. Encode image timesteps to single token (B, 1, inner_dim)
        if not torch.is_tensor(timestep_img):
            timestep_img = torch.tensor([timestep_img], dtype=torch.long, device=vae_hidden_states.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timestep_img = timestep_img * torch.ones(batch_size, dtype=timestep_img.dtype, device=timestep_img.device)
        timestep_img_token = self.timestep_img_proj(timestep_img)
        # t_img_token does not contain any weights and will always return f32 tensors
        # but time_embedding might be fp16, so we need to cast here.
        timestep_img_token = timestep_img_token.to(dtype=self.dtype)
        timestep_img_token = self.timestep_img_embed(timestep_img_token)
        timestep_img_token = timestep_img_token.unsqueeze(dim=1)
        # 1.3. Encode text timesteps to single token (B, 1, inner_dim)
        if not torch.is_tensor(timestep_text):
            timestep_text = torch.tensor([timestep_text], dtype=torch.long, device=vae_hidden_states.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timestep_text = timestep_text * torch.ones(batch_size, dtype=timestep_text.dtype, device=timestep_text.device)
        timestep_text_token = self.timestep_text_proj(timestep_text)
        timestep_text_token = timestep_text_token.to(dtype=self.dtype)
        timestep_text_token = self.timestep_text_embed(timestep_text_token)
        timestep_text_token = timestep_text_token.unsqueeze(dim=1)
        # 1.4. Concatenate all of the embeddings together.
        if self.use_data_type_embedding:
            assert data_type is not None, "data_type must be supplied if the model uses a data type embedding"
            if not torch.is_tensor(data_type):
                data_type = torch.tensor([data_type], dtype=torch.int, device=vae_hidden_states.device)
            # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
            data_type = data_type * torch.ones(batch_size, dtype=data_type.dtype, device=data_type.device)
            data_type_token = self.data_type_token_embedding(data_type).unsqueeze(dim=1)
            hidden_states = torch.cat([timestep_img_token, timestep_text_token, data_type_token, text_hidden_states,
                                       clip_hidden_states, vae_hidden_states], dim=1)
        else:
            hidden_states = torch.cat([timestep_img_token, timestep_text_token, text_hidden_states,
                                       clip_hidden_states, vae_hidden_states], dim=1)
        # 1.5. Prepare the positional embeddings and add to hidden states
        if self.use_data_type_embedding:
            pos_embed = torch.cat(
                [self.pos_embed[:, : 1 + 1, :], self.data_type_pos_embed_token, self.pos_embed[:, 1 + 1:, :]], dim=1)
        else:
            pos_embed = self.pos_embed
        hidden_states = hidden_states + pos_embed
        hidden_states = self.pos_embed_drop(hidden_states)
        # 2. Blocks
        hidden_states = self.transformer(hidden_states, encoder_hidden_states=encoder_hidden_states, timestep=None,
                                         class_labels=None, cross_attention_kwargs=cross_attention_kwargs,
                                         return_dict=False, hidden_states_is_embedding=True, unpatchify=False)[0]
        # 3. Output
        # Split out the predicted noise representation.
        if self.use_data_type_embedding:
            (t_img_token_out, t_text_token_out, data_type_token_out, text_out, img_clip_out,
             img_vae_out) = hidden_states.split((1, 1, 1, num_text_tokens, 1, num_img_tokens), dim=1)
        else:
            t_img_token_out, t_text_token_out, text_out, img_clip_out, img_vae_out = hidden_states.split(
                (1, 1, num_text_tokens, 1, num_img_tokens), dim=1)
        img_vae_out = self.vae_img_out(img_vae_out)
        # unpatchify
        height = width = int(img_vae_out.shape[1] ** 0.5)
        img_vae_out = img_vae_out.reshape(shape=(-1, height, width, self.patch_size, self.patch_size,
                                                 self.out_channels))
        img_vae_out = torch.einsum("nhwpqc->nchpwq", img_vae_out)
        img_vae_out = img_vae_out.reshape(shape=(-1, self.out_channels, height * self.patch_size,
                                                 width * self.patch_size))
        img_clip_out = self.clip_img_out(img_clip_out)
        text_out = self.text_out(text_out)
        return img_vae_out, img_clip_out, text_out


def build():
    return UniDiffuserModel(text_dim=8, clip_img_dim=12, num_text_tokens=6, num_attention_heads=2,
                            attention_head_dim=8, in_channels=4, out_channels=4, num_layers=6, dropout=0.0,
                            attention_bias=False, sample_size=8, patch_size=2, activation_fn="gelu",
                            pre_layer_norm=False, use_timestep_embedding=False, norm_elementwise_affine=True,
                            use_patch_pos_embed=False, ff_final_dropout=True, use_data_type_embedding=True)


HEIGHT = WIDTH = 64  # the image size: VAE latents of HEIGHT / vae_scale_factor (8)
NUM_CHANNELS_LATENTS, CLIP_IMG_DIM = 4, 12


def _split(x, height, width):
    # UniDiffuserPipeline._split: the flat latents back into (B, C, H, W) and (B, 1, clip_img_dim)
    batch_size = x.shape[0]
    latent_height = height // 8
    latent_width = width // 8
    img_vae_dim = NUM_CHANNELS_LATENTS * latent_height * latent_width
    img_vae, img_clip = x.split([img_vae_dim, CLIP_IMG_DIM], dim=1)
    img_vae = torch.reshape(img_vae, (batch_size, NUM_CHANNELS_LATENTS, latent_height, latent_width))
    img_clip = torch.reshape(img_clip, (batch_size, 1, CLIP_IMG_DIM))
    return img_vae, img_clip


def _combine(img_vae, img_clip):
    # UniDiffuserPipeline._combine: (B, C, H, W) and (B, 1, clip_img_dim) into one (B, C·H·W + clip_img_dim)
    img_vae = torch.reshape(img_vae, (img_vae.shape[0], -1))
    img_clip = torch.reshape(img_clip, (img_clip.shape[0], -1))
    return torch.concat([img_vae, img_clip], dim=-1)


def inputs(g):
    # encode_prompt then text_decoder.encode: [1, num_text_tokens, text_dim]; prepare_image_vae_latents and
    # prepare_image_clip_latents (init_noise_sigma 1), joined by _combine as the sampler's latents
    prompt_embeds = torch.randn((1, 6, 8), generator=g)
    image_vae_latents = torch.randn((1, NUM_CHANNELS_LATENTS, HEIGHT // 8, WIDTH // 8), generator=g)
    image_clip_latents = torch.randn((1, 1, CLIP_IMG_DIM), generator=g)
    return {"prompt_embeds": prompt_embeds, "noise": _combine(image_vae_latents, image_clip_latents)}


def call(model, x, sigma, c):
    # UniDiffuserPipeline._get_noise_pred, mode "text2img", guidance_scale <= 1
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    img_vae_latents, img_clip_latents = _split(x, HEIGHT, WIDTH)
    img_vae_out, img_clip_out, text_out = model(img_vae_latents, img_clip_latents, c["prompt_embeds"],
                                                timestep_img=t, timestep_text=0, data_type=1)
    img_out = _combine(img_vae_out, img_clip_out)
    return img_out


PRODUCER = dict(
    library_source="replica of huggingface/diffusers pipelines/unidiffuser/modeling_uvit.py (UniDiffuser-v1's "
                   "configuration) and the parts it imports (torch 1.13)",
    timestep="timestep_img sigma*1000, f32 [1] (UniDiffuserPipeline: the scheduler's t); timestep_text the int 0 "
             "(text2img: the text is clean)",
    velocity="the image noise prediction as is: _combine(img_vae_out, img_clip_out), the flat [VAE latents | CLIP "
             "image embedding] the sampler steps; text_out not read",
    note="UniDiffuserModel at width 16 (2 heads of 8), 3 in-blocks, a mid block, 3 out-blocks with U-ViT long skips "
         "(SkipBlock: Linear(cat[x, skip]) then LayerNorm, LIFO); post-LN UniDiffuserBlocks (x = norm1(x + attn(x)), "
         "x = norm3(x + ff(x)), exact-GELU FeedForward with a final Dropout); tokens [t_img, t_text (raw sinusoids, "
         "nn.Identity), data type (nn.Embedding of int32 1), 6 text rows (Linear), CLIP image row (Linear), 16 VAE "
         "patches (2x2 conv)] plus a learned table with the data-type position spliced in; split back into three "
         "heads, the VAE rows unpatchified by einsum; the sampler's latents one flat vector split and joined around "
         "each call")

if __name__ == "__main__":
    capture("unidiffuser", build, inputs, call, sys.argv[1], PRODUCER)
