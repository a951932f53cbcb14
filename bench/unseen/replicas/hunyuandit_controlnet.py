"""HunyuanDiT (v1.1 layout) with a HunyuanDiT ControlNet (HunyuanDiT2DControlNetModel feeding HunyuanDiT2DModel),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_hunyuan.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa line for line: the transformer's text_embedder (PixArtAlphaTextProjection
silu_fp32), text_embedding_padding, PatchEmbed (pos_embed_type None), HunyuanCombinedTimestepTextSizeStyleEmbedding
and transformer_num_layers // 2 - 1 HunyuanDiTBlocks (skip False, the first half of the model); the same pos_embed
applied to the control latent, through input_block (a Linear, zero-initialised upstream, redrawn here like every
weight so that the control signal flows) and added: hidden_states + input_block(pos_embed(controlnet_cond)); each
block's output through its own Linear controlnet_blocks[i] (zero-initialised upstream, redrawn here), then times
conditioning_scale. Its classes are hunyuan_dit.py's (hunyuan_transformer_2d.py at 03e717a407a6 and the parts it
imports), the same upstream classes controlnet_hunyuan.py imports. The transformer is hunyuan_dit.py's
HunyuanDiT2DModel as it is: its forward already carries upstream's controlnet path (for layer > num_layers // 2,
skip = skips.pop() + controlnet_block_samples.pop(), the last ControlNet sample to the first skip block; a
ValueError if any are left).

Pipeline as HunyuanDiTControlNetPipeline (pipelines/controlnet_hunyuandit/pipeline_hunyuandit_controlnet.py at
0cfed7b75768fd0048a87cc3728d5665aab96cc3) calls the two models without guidance: each step t_expand =
torch.tensor([t] * B).to(latents dtype) (t = round(σ·1000)); the ControlNet on the latents, t_expand, the BERT and
T5 embeds and masks, image_meta_size, style, image_rotary_emb, controlnet_cond = the VAE-encoded control image times
scaling_factor (drawn here as a latent [1, 4, 8, 8]), conditioning_scale = controlnet_conditioning_scale = 0.7 (the
pipeline's default 1.0), return_dict False, [0]; then the transformer on the same arguments with
controlnet_block_samples = those samples; velocity = noise_pred.chunk(2, dim=1)[0] as is. The request inputs as in
hunyuan_dit.py. The two models are held by one container module (attribute names controlnet, transformer), never
called itself, so that run.py's one-model capture records both.

Tiny config: hunyuan_dit.py's (2 heads of 16, hidden 32, 6 transformer blocks: blocks 4 and 5 take the long skips
of blocks 1 and 0), the ControlNet with transformer_num_layers 6: 6 // 2 - 1 = 2 blocks, whose 2 samples are added
to the 2 long skips (block 4: skip of block 1 + sample 1; block 5: skip of block 0 + sample 0).

usage: /usr/bin/python3 bench/unseen/replicas/hunyuandit_controlnet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import hunyuan_dit
from hunyuan_dit import (HunyuanCombinedTimestepTextSizeStyleEmbedding, HunyuanDiT2DModel, HunyuanDiTBlock,
                         PatchEmbed, PixArtAlphaTextProjection)
from run import capture


def zero_module(module):
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


class HunyuanDiT2DControlNetModel(nn.Module):
    def __init__(self, conditioning_channels=3, num_attention_heads=16, attention_head_dim=88, in_channels=None,
                 patch_size=None, activation_fn="gelu-approximate", sample_size=32, hidden_size=1152,
                 transformer_num_layers=40, mlp_ratio=4.0, cross_attention_dim=1024, cross_attention_dim_t5=2048,
                 pooled_projection_dim=1024, text_len=77, text_len_t5=256, use_style_cond_and_image_meta_size=True):
        super().__init__()
        self.num_heads = num_attention_heads
        self.inner_dim = num_attention_heads * attention_head_dim
        self.text_embedder = PixArtAlphaTextProjection(in_features=cross_attention_dim_t5,
                                                       hidden_size=cross_attention_dim_t5 * 4,
                                                       out_features=cross_attention_dim, act_fn="silu_fp32")
        self.text_embedding_padding = nn.Parameter(
            torch.randn(text_len + text_len_t5, cross_attention_dim, dtype=torch.float32))
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, in_channels=in_channels,
                                    embed_dim=hidden_size, patch_size=patch_size, pos_embed_type=None)
        self.time_extra_emb = HunyuanCombinedTimestepTextSizeStyleEmbedding(
            hidden_size, pooled_projection_dim=pooled_projection_dim, seq_len=text_len_t5,
            cross_attention_dim=cross_attention_dim_t5,
            use_style_cond_and_image_meta_size=use_style_cond_and_image_meta_size)
        # controlnet_blocks
        self.controlnet_blocks = nn.ModuleList([])
        # HunyuanDiT Blocks
        self.blocks = nn.ModuleList([
            HunyuanDiTBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads, activation_fn=activation_fn,
                            ff_inner_dim=int(self.inner_dim * mlp_ratio), cross_attention_dim=cross_attention_dim,
                            qk_norm=True,  # See https://huggingface.co/papers/2302.05442 for details.
                            skip=False)  # always False as it is the first half of the model
            for layer in range(transformer_num_layers // 2 - 1)])
        self.input_block = zero_module(nn.Linear(hidden_size, hidden_size))
        for _ in range(len(self.blocks)):
            controlnet_block = nn.Linear(hidden_size, hidden_size)
            controlnet_block = zero_module(controlnet_block)
            self.controlnet_blocks.append(controlnet_block)

    def forward(self, hidden_states, timestep, controlnet_cond, conditioning_scale=1.0, encoder_hidden_states=None,
                text_embedding_mask=None, encoder_hidden_states_t5=None, text_embedding_mask_t5=None,
                image_meta_size=None, style=None, image_rotary_emb=None, return_dict=True):
        height, width = hidden_states.shape[-2:]
        hidden_states = self.pos_embed(hidden_states)  # b,c,H,W -> b, N, C
        # 2. pre-process
        hidden_states = hidden_states + self.input_block(self.pos_embed(controlnet_cond))
        temb = self.time_extra_emb(timestep, encoder_hidden_states_t5, image_meta_size, style,
                                   hidden_dtype=timestep.dtype)  # [B, D]
        # text projection
        batch_size, sequence_length, _ = encoder_hidden_states_t5.shape
        encoder_hidden_states_t5 = self.text_embedder(
            encoder_hidden_states_t5.view(-1, encoder_hidden_states_t5.shape[-1]))
        encoder_hidden_states_t5 = encoder_hidden_states_t5.view(batch_size, sequence_length, -1)
        encoder_hidden_states = torch.cat([encoder_hidden_states, encoder_hidden_states_t5], dim=1)
        text_embedding_mask = torch.cat([text_embedding_mask, text_embedding_mask_t5], dim=-1)
        text_embedding_mask = text_embedding_mask.unsqueeze(2).bool()
        encoder_hidden_states = torch.where(text_embedding_mask, encoder_hidden_states, self.text_embedding_padding)
        block_res_samples = ()
        for layer, block in enumerate(self.blocks):
            hidden_states = block(hidden_states, temb=temb, encoder_hidden_states=encoder_hidden_states,
                                  image_rotary_emb=image_rotary_emb)  # (N, L, D)
            block_res_samples = block_res_samples + (hidden_states,)
        controlnet_block_res_samples = ()
        for block_res_sample, controlnet_block in zip(block_res_samples, self.controlnet_blocks):
            block_res_sample = controlnet_block(block_res_sample)
            controlnet_block_res_samples = controlnet_block_res_samples + (block_res_sample,)
        # 6. scaling
        controlnet_block_res_samples = [sample * conditioning_scale for sample in controlnet_block_res_samples]
        return (controlnet_block_res_samples,)


class HunyuanDiTControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.transformer = hunyuan_dit.build()
        self.controlnet = HunyuanDiT2DControlNetModel(
            conditioning_channels=3, num_attention_heads=2, attention_head_dim=16, in_channels=4, patch_size=2,
            sample_size=8, hidden_size=32, transformer_num_layers=6, mlp_ratio=4.0, cross_attention_dim=24,
            cross_attention_dim_t5=32, pooled_projection_dim=16, text_len=5, text_len_t5=6,
            use_style_cond_and_image_meta_size=True)


CONDITIONING_SCALE = 0.7  # controlnet_conditioning_scale (the pipeline's default 1.0)


def inputs(g):
    c = hunyuan_dit.inputs(g)
    noise = c.pop("noise")
    c["control_image"] = torch.randn((1, 4, 8, 8), generator=g)
    c["noise"] = noise
    return c


def call(model, x, sigma, c):
    # t_expand = torch.tensor([t] * B).to(dtype=latent_model_input.dtype)
    t = torch.tensor([int(round(sigma * 1000))] * x.shape[0]).to(dtype=x.dtype)
    kw = dict(encoder_hidden_states=c["encoder_hidden_states"], text_embedding_mask=c["text_embedding_mask"],
              encoder_hidden_states_t5=c["encoder_hidden_states_t5"],
              text_embedding_mask_t5=c["text_embedding_mask_t5"], image_meta_size=c["image_meta_size"],
              style=c["style"], image_rotary_emb=(c["image_rotary_cos"], c["image_rotary_sin"]))
    control_block_samples = model.controlnet(x, t, return_dict=False, controlnet_cond=c["control_image"],
                                             conditioning_scale=CONDITIONING_SCALE, **kw)[0]
    noise_pred = model.transformer(x, t, return_dict=False, controlnet_block_samples=control_block_samples, **kw)[0]
    noise_pred, _ = noise_pred.chunk(2, dim=1)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_hunyuan.py@071190daca86 and "
                   "transformers/hunyuan_transformer_2d.py@03e717a407a6 (HunyuanDiT + ControlNet, torch 1.13)",
    timestep="round(sigma*1000) cast to the latents' dtype, the same t_expand to the ControlNet and the transformer",
    velocity="first half of the transformer's output channels (learned sigma), not negated",
    note="HunyuanDiT v1.1 layout (6 blocks, long skips 1->4, 0->5) with a 2-block HunyuanDiT2DControlNetModel: its "
         "own text/timestep embedders, the shared patch embed applied to the latents and to the control latent "
         "(through input_block Linear, added), 2 HunyuanDiTBlocks, per-block Linear controlnet_blocks x "
         "conditioning_scale 0.7; the transformer adds sample.pop() to each long skip (LIFO); each step the "
         "ControlNet then the transformer")

if __name__ == "__main__":
    capture("hunyuandit_controlnet", HunyuanDiTControlNet, inputs, call, sys.argv[1], PRODUCER)
