"""GLIGEN: Stable Diffusion 1.x's UNet2DConditionModel with attention_type "gated" (grounded generation from text
phrases and bounding boxes), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Upstream read (huggingface/diffusers):
- src/diffusers/models/unets/unet_2d_condition.py at 00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f:
  _set_pos_net_if_use_gligen (called last in __init__, after conv_out: `position_net =
  GLIGENTextBoundingboxProjection(positive_len=cross_attention_dim[0], out_dim=cross_attention_dim,
  feature_type="text-only")`), and forward's step "2.5 GLIGEN position net", right after conv_in: when
  cross_attention_kwargs["gligen"] is given, `cross_attention_kwargs = cross_attention_kwargs.copy(); gligen_args =
  cross_attention_kwargs.pop("gligen"); cross_attention_kwargs["gligen"] = {"objs": self.position_net(**gligen_args)}`,
  then the (copied, "scale" popped) kwargs passed to every cross-attention down, mid and up block, and by them to
  every Transformer2DModel and BasicTransformerBlock. The rest of the forward is sd_unet.py's (and controlnet.py's
  upsample_size rule).
- src/diffusers/models/embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b: get_fourier_embeds_from_boundingbox
  (emb = 100 ** (arange(8) / 8) cast to the boxes' dtype, times each box coordinate, [sin, cos] stacked, permuted
  (0, 1, 3, 4, 2) and reshaped to [B, N, 8·2·4 = 64]) and GLIGENTextBoundingboxProjection "text-only": the Fourier
  box embedding and the phrase embeddings each blended with a learned null feature by the object mask (x·m + (1 -
  m)·null), joined, then linears = Sequential(Linear(positive_len + 64, 512), SiLU, Linear(512, 512), SiLU,
  Linear(512, out_dim)) (the 512 is a literal upstream, kept).
- src/diffusers/models/attention.py (the text with GatedSelfAttentionDense beside JointTransformerBlock; the stored
  upstream copy the search index holds of this file has no commit we could name: index id 296327041, "Copyright
  2024"): GatedSelfAttentionDense (linear: Linear(context_dim, query_dim) on the objects; attn: Attention(query_dim,
  heads, dim_head) self-attention over [visual tokens; projected objects] after norm1, only the first n_visual rows
  kept; ff: FeedForward(geglu); norm1, norm2 LayerNorms; scalar parameters alpha_attn, alpha_dense:
  x = x + tanh(alpha_attn)·attn(norm1(cat([x, objs], 1)))[:, :n_visual]; x = x + tanh(alpha_dense)·ff(norm2(x));
  with `enabled` False it returns x as is) and BasicTransformerBlock with attention_type "gated": the fuser built
  last in __init__ ("4. Fuser", after ff); in forward, `gligen_kwargs = cross_attention_kwargs.pop("gligen")` before
  attn1, and after the self-attention residual `hidden_states = self.fuser(hidden_states, gligen_kwargs["objs"])`,
  then cross-attention and the feed-forward as before.
- pipeline: src/diffusers/pipelines/stable_diffusion_gligen/pipeline_stable_diffusion_gligen.py at
  0aeefa051cefedcc7df793d38b38f6419bcc3242 (StableDiffusionGLIGENPipeline.__call__): max_objs = 30 slots; boxes [1,
  30, 4] (xyxy in [0, 1], zero rows past the n_objs given), text_embeddings [1, 30, cross_attention_dim] (the CLIP
  pooled embedding of each phrase, zero rows after), masks [1, 30] (1 for the n_objs given); cross_attention_kwargs
  = {"gligen": {"boxes", "positive_embeddings", "masks"}} built once before the loop; scheduled sampling:
  num_grounding_steps = int(gligen_scheduled_sampling_beta · len(timesteps)), enable_fuser(True) before the loop and,
  at step i == num_grounding_steps, enable_fuser(False) (every GatedSelfAttentionDense's `enabled` set False: from
  then the fusers are still called, with the position net's objects, and return their input).

Module tree, parameter names, call boundaries and arithmetic as upstream: sd_unet.py's UNet2DConditionModel and blocks
imported as they are, their classes swapped (same module tree and parameters) for subclasses under the upstream
names whose forwards pass cross_attention_kwargs on as upstream's do; a fuser added to every BasicTransformerBlock and
position_net to the UNet, both last, where upstream's __init__ puts them. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path, in sd_unet.py's Attention).

Tiny config: the SD 1.x layout at sd_unet.py's --small widths (block_out_channels (8, 16), layers_per_block 1, 2
heads (head dims 4 and 8), GroupNorm of 4 groups, cross_attention_dim 16 so positive_len 16), 8x8 latents, text
states [1, 6, 16]; the position net's hidden width 512 as upstream; 2 grounded objects in the 30 slots.
gligen_scheduled_sampling_beta 0.7 (the pipeline's default 0.3 grounds int(0.3·3) = 0 of 3 steps): int(0.7·3) = 2,
so steps 0 and 1 run the fusers and step 2 runs them disabled (identity). Pipeline otherwise as
StableDiffusionGLIGENPipeline without guidance: timestep the scheduler's t (here σ·1000, f32, one per batch); the
noise prediction taken as the velocity as is (the capture's flow Euler loop).

usage: /usr/bin/python3 bench/unseen/replicas/gligen.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import sd_unet
from run import capture
from sd_unet import Attention, FeedForward

MAX_OBJS = 30
N_OBJS = 2
GLIGEN_SCHEDULED_SAMPLING_BETA = 0.7
NUM_STEPS = 3  # len(timesteps): run.py's loop


def get_fourier_embeds_from_boundingbox(embed_dim, box):
    batch_size, num_boxes = box.shape[:2]
    emb = 100 ** (torch.arange(embed_dim) / embed_dim)
    emb = emb[None, None, None].to(device=box.device, dtype=box.dtype)
    emb = emb * box.unsqueeze(-1)
    emb = torch.stack((emb.sin(), emb.cos()), dim=-1)
    emb = emb.permute(0, 1, 3, 4, 2).reshape(batch_size, num_boxes, embed_dim * 2 * 4)
    return emb


class GLIGENTextBoundingboxProjection(nn.Module):
    """feature_type "text-only" (the "text-image" branch not replicated)."""

    def __init__(self, positive_len, out_dim, feature_type="text-only", fourier_freqs=8):
        super().__init__()
        self.positive_len = positive_len
        self.out_dim = out_dim
        self.fourier_embedder_dim = fourier_freqs
        self.position_dim = fourier_freqs * 2 * 4  # 2: sin/cos, 4: xyxy
        if isinstance(out_dim, tuple):
            out_dim = out_dim[0]
        if feature_type != "text-only":
            raise ValueError("only feature_type 'text-only' (attention_type 'gated') is replicated")
        self.linears = nn.Sequential(
            nn.Linear(self.positive_len + self.position_dim, 512),
            nn.SiLU(),
            nn.Linear(512, 512),
            nn.SiLU(),
            nn.Linear(512, out_dim),
        )
        self.null_positive_feature = torch.nn.Parameter(torch.zeros([self.positive_len]))
        self.null_position_feature = torch.nn.Parameter(torch.zeros([self.position_dim]))

    def forward(self, boxes, masks, positive_embeddings=None):
        masks = masks.unsqueeze(-1)
        # embedding position (it may includes padding as placeholder)
        xyxy_embedding = get_fourier_embeds_from_boundingbox(self.fourier_embedder_dim, boxes)  # B*N*4 -> B*N*C
        # learnable null embedding
        xyxy_null = self.null_position_feature.view(1, 1, -1)
        # replace padding with learnable null embedding
        xyxy_embedding = xyxy_embedding * masks + (1 - masks) * xyxy_null
        # positionet with text only information
        positive_null = self.null_positive_feature.view(1, 1, -1)
        positive_embeddings = positive_embeddings * masks + (1 - masks) * positive_null
        objs = self.linears(torch.cat([positive_embeddings, xyxy_embedding], dim=-1))
        return objs


class GatedSelfAttentionDense(nn.Module):
    def __init__(self, query_dim, context_dim, n_heads, d_head):
        super().__init__()
        # we need a linear projection since we need cat visual feature and obj feature
        self.linear = nn.Linear(context_dim, query_dim)
        self.attn = Attention(query_dim=query_dim, heads=n_heads, dim_head=d_head)
        self.ff = FeedForward(query_dim)  # activation_fn "geglu", mult 4
        self.norm1 = nn.LayerNorm(query_dim)
        self.norm2 = nn.LayerNorm(query_dim)
        self.register_parameter("alpha_attn", nn.Parameter(torch.tensor(0.0)))
        self.register_parameter("alpha_dense", nn.Parameter(torch.tensor(0.0)))
        self.enabled = True

    def forward(self, x, objs):
        if not self.enabled:
            return x
        n_visual = x.shape[1]
        objs = self.linear(objs)
        x = x + self.alpha_attn.tanh() * self.attn(self.norm1(torch.cat([x, objs], dim=1)))[:, :n_visual, :]
        x = x + self.alpha_dense.tanh() * self.ff(self.norm2(x))
        return x


class BasicTransformerBlock(sd_unet.BasicTransformerBlock):
    """attention_type "gated": sd_unet.py's block (norm_type "layer_norm") plus self.fuser."""

    def forward(self, hidden_states, encoder_hidden_states=None, cross_attention_kwargs=None):
        norm_hidden_states = self.norm1(hidden_states)
        # 1. Prepare GLIGEN inputs
        cross_attention_kwargs = cross_attention_kwargs.copy() if cross_attention_kwargs is not None else {}
        gligen_kwargs = cross_attention_kwargs.pop("gligen", None)
        attn_output = self.attn1(norm_hidden_states, encoder_hidden_states=None, **cross_attention_kwargs)
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        # 1.2 GLIGEN Control
        if gligen_kwargs is not None:
            hidden_states = self.fuser(hidden_states, gligen_kwargs["objs"])
        # 3. Cross-Attention
        norm_hidden_states = self.norm2(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 **cross_attention_kwargs)
        hidden_states = attn_output + hidden_states
        # 4. Feed-forward
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class Transformer2DModel(sd_unet.Transformer2DModel):
    def forward(self, hidden_states, encoder_hidden_states=None, cross_attention_kwargs=None, return_dict=False):
        batch, _, height, width = hidden_states.shape
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        hidden_states = self.proj_in(hidden_states)
        inner_dim = hidden_states.shape[1]
        hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                  cross_attention_kwargs=cross_attention_kwargs)
        hidden_states = hidden_states.reshape(batch, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
        hidden_states = self.proj_out(hidden_states)
        output = hidden_states + residual
        return (output,)


class CrossAttnDownBlock2D(sd_unet.CrossAttnDownBlock2D):
    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, cross_attention_kwargs=None):
        output_states = ()
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 cross_attention_kwargs=cross_attention_kwargs, return_dict=False)[0]
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock2DCrossAttn(sd_unet.UNetMidBlock2DCrossAttn):
    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, cross_attention_kwargs=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 cross_attention_kwargs=cross_attention_kwargs, return_dict=False)[0]
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class CrossAttnUpBlock2D(sd_unet.CrossAttnUpBlock2D):
    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                cross_attention_kwargs=None, upsample_size=None):
        for resnet, attn in zip(self.resnets, self.attentions):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 cross_attention_kwargs=cross_attention_kwargs, return_dict=False)[0]
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


_SWAP = {sd_unet.BasicTransformerBlock: BasicTransformerBlock, sd_unet.Transformer2DModel: Transformer2DModel,
         sd_unet.CrossAttnDownBlock2D: CrossAttnDownBlock2D, sd_unet.UNetMidBlock2DCrossAttn: UNetMidBlock2DCrossAttn,
         sd_unet.CrossAttnUpBlock2D: CrossAttnUpBlock2D}


class UNet2DConditionModel(sd_unet.UNet2DConditionModel):
    """sd_unet.py's SD 1.x UNet built with attention_type "gated": a fuser in every BasicTransformerBlock and the
    position net, its forward as upstream's with cross_attention_kwargs (no adapter or ControlNet residuals)."""

    def __init__(self, attention_type="gated", **kw):
        super().__init__(**kw)
        cross_attention_dim = kw["cross_attention_dim"]
        for module in list(self.modules()):
            if type(module) in _SWAP:
                module.__class__ = _SWAP[type(module)]
        for module in list(self.modules()):
            if isinstance(module, BasicTransformerBlock):
                dim = module.norm1.normalized_shape[0]
                heads = module.attn1.heads
                # 4. Fuser: GatedSelfAttentionDense(dim, cross_attention_dim, num_attention_heads, attention_head_dim)
                module.fuser = GatedSelfAttentionDense(dim, cross_attention_dim, heads, dim // heads)
        self.num_upsamplers = sum(1 for b in self.up_blocks if b.upsamplers is not None)
        # _set_pos_net_if_use_gligen (cross_attention_dim made a tuple per block upstream: positive_len is its first)
        cross_attention_dim = (cross_attention_dim,) * len(self.down_blocks)
        positive_len = cross_attention_dim[0]
        feature_type = "text-only" if attention_type == "gated" else "text-image"
        self.position_net = GLIGENTextBoundingboxProjection(positive_len=positive_len, out_dim=cross_attention_dim,
                                                            feature_type=feature_type)

    def forward(self, sample, timestep, encoder_hidden_states, cross_attention_kwargs=None, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        forward_upsample_size = False
        upsample_size = None
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        # 1. time (get_time_embed)
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 2.5 GLIGEN position net
        if cross_attention_kwargs is not None and cross_attention_kwargs.get("gligen", None) is not None:
            cross_attention_kwargs = cross_attention_kwargs.copy()
            gligen_args = cross_attention_kwargs.pop("gligen")
            cross_attention_kwargs["gligen"] = {"objs": self.position_net(**gligen_args)}
        # 3. down
        if cross_attention_kwargs is not None:
            cross_attention_kwargs = cross_attention_kwargs.copy()
            cross_attention_kwargs.pop("scale", 1.0)
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):  # has_cross_attention
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states,
                                                       cross_attention_kwargs=cross_attention_kwargs)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states,
                                cross_attention_kwargs=cross_attention_kwargs)
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if isinstance(upsample_block, CrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states,
                                        cross_attention_kwargs=cross_attention_kwargs, upsample_size=upsample_size)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size)
        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


def build():
    return UNet2DConditionModel(attention_type="gated", block_out_channels=(8, 16), cross_attention_dim=16, groups=4)


def inputs(g):
    # the pipeline's GLIGEN variables: boxes, phrase embeddings (CLIP pooled, here drawn) and masks in 30 slots
    boxes = torch.zeros(1, MAX_OBJS, 4)
    boxes[0, :N_OBJS] = torch.tensor([[0.125, 0.25, 0.5, 0.75], [0.375, 0.125, 0.875, 0.625]])
    text_embeddings = torch.zeros(1, MAX_OBJS, 16)
    text_embeddings[0, :N_OBJS] = torch.randn((N_OBJS, 16), generator=g)
    masks = torch.zeros(1, MAX_OBJS)
    masks[0, :N_OBJS] = 1
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "gligen_boxes": boxes, "gligen_positive_embeddings": text_embeddings, "gligen_masks": masks,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def enable_fuser(unet, enabled=True):
    for module in unet.modules():
        if type(module) is GatedSelfAttentionDense:
            module.enabled = enabled


def prepare(model, cond):
    """StableDiffusionGLIGENPipeline before its loop: cross_attention_kwargs["gligen"], the number of grounded
    steps, enable_fuser(True)."""
    cond["cross_attention_kwargs"] = {"gligen": {"boxes": cond["gligen_boxes"],
                                                 "positive_embeddings": cond["gligen_positive_embeddings"],
                                                 "masks": cond["gligen_masks"]}}
    cond["num_grounding_steps"] = int(GLIGEN_SCHEDULED_SAMPLING_BETA * NUM_STEPS)
    cond["i"] = 0
    enable_fuser(model, True)


def call(model, x, sigma, c):
    i = c["i"]
    c["i"] += 1
    # Scheduled sampling
    if i == c["num_grounding_steps"]:
        enable_fuser(model, False)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                 cross_attention_kwargs=c["cross_attention_kwargs"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unets/unet_2d_condition.py@00f354d14d00, embeddings.py@"
                   "0002117e9fa1, attention.py (GatedSelfAttentionDense, gated BasicTransformerBlock), "
                   "pipeline_stable_diffusion_gligen.py@0aeefa051cef (SD 1.x GLIGEN, torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (the scheduler's t)",
    velocity="the UNet's noise prediction as is",
    note="SD 1.x UNet at widths 8/16 with attention_type 'gated': position_net (Fourier embedding of 30 boxes, "
         "masked blend with learned null features, Linear-SiLU-Linear-SiLU-Linear 512 wide) called each step after "
         "conv_in; in every BasicTransformerBlock, after self-attention, GatedSelfAttentionDense: x + tanh(a)·"
         "attn(LN(cat[x, Linear(objs)]))[:, :64] then x + tanh(b)·GEGLU-FF(LN(x)); scheduled sampling beta 0.7: "
         "fusers enabled for steps 0-1, disabled (identity) at step 2")

if __name__ == "__main__":
    capture("gligen", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
