"""Wan 2.1 I2V-14B video DiT (image to video with CLIP image tokens), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_wan.py at
b6bd8f1fb709d8ff1310d1a9b649f4225cf2ca47 with the configuration Wan2.1-I2V sets (image_dim, added_kv_proj_dim =
the inner width): wan22_ti2v.py's classes, whose optional branches are upstream's own: WanImageEmbedding
(FP32LayerNorm, a GELU FeedForward of mult 1, FP32LayerNorm) makes the image tokens, joined before the projected
text; each block's cross-attention takes the encoder states' first rows past the 512 of the text (hard-coded
upstream) as the image's, attends them through add_k_proj and add_v_proj (their keys RMS-normed across heads) and
adds that to the text's attention before to_out.

Pipeline as WanImageToVideoPipeline calls the 2.1 I2V model (no expand_timesteps): the model input is the noisy
latents joined on the channels with the condition (a mask of 4 channels, the first frame's 1, and the image's
latents then zeros), the same at every step; the timestep σ·1000 for the batch; the CLIP image embedding [1, 5, 12]
(257 tokens upstream) and the text states padded to 512 rows; the output the velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/wan_i2v.py OUTDIR
"""
import sys

import torch

from run import capture
from wan22_ti2v import WanTransformer3DModel


def build():
    # 2 heads of 12 (RoPE t/h/w 4/4/4), one block, text 16 wide, image tokens 12 wide; 4 latent channels joined with
    # a 4-channel mask and 4 image-latent channels (16 + 4 + 16 = 36 upstream)
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=12,
                                 out_channels=4, text_dim=16, freq_dim=16, ffn_dim=48, num_layers=1,
                                 cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=12,
                                 added_kv_proj_dim=24, rope_max_seq_len=32)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 512, 16), generator=g),
            "encoder_hidden_states_image": torch.randn((1, 5, 12), generator=g),
            "condition": torch.cat([torch.cat([torch.ones((1, 4, 1, 4, 4)), torch.zeros((1, 4, 2, 4, 4))], dim=2),
                                    torch.cat([torch.randn((1, 4, 1, 4, 4), generator=g), torch.zeros((1, 4, 2, 4, 4))],
                                              dim=2)], dim=1),
            "noise": torch.randn((1, 4, 3, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).expand(x.shape[0])
    latent_model_input = torch.cat([x, c["condition"]], dim=1).to(x.dtype)
    return model(hidden_states=latent_model_input, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_hidden_states_image=c["encoder_hidden_states_image"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_wan.py@b6bd8f1fb709 (Wan 2.1 I2V's configuration) "
                   "and the parts it imports (torch 1.13)",
    timestep="sigma*1000 float32 [1] expanded to the batch",
    velocity="model output as is (flow prediction), not negated",
    note="Wan 2.1 I2V DiT, 1 block: CLIP image tokens through WanImageEmbedding joined before 512 text rows; each "
         "cross-attention splits them back (the text's 512 rows hard-coded), attends the image rows through "
         "add_k_proj/add_v_proj with RMS-normed keys and adds that to the text's attention; the model input the "
         "noisy latents joined with a mask and the image latents on the channels; 3 latent frames of 4x4")

if __name__ == "__main__":
    capture("wan_i2v", build, inputs, call, sys.argv[1], PRODUCER)
