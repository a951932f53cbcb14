"""JoyAI-Echo audio-video DiT (LTX-2 with memory masks), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_joyai_echo.py at
9d9f28d2e7f4b7051e77727cb6d480766d89115d (JoyAIEchoTransformer3DModel: a subclass of LTX2VideoTransformer3DModel that
overrides forward only), line for line. Everything it inherits (the module tree, parameter names and shapes, the
embedders, RoPE, attention) is ltx2.py's replica of transformer_ltx2.py at 0528fde41dbdd1ab469de2ccce0b79683463e04f,
imported from there, at the LTX-2.0 defaults (no gated attention, no prompt modulation, interleaved RoPE, f64
frequencies, use_prompt_embeddings).

One piece is NOT from a stored upstream file: JoyAI's forward calls each block with self_attention_mask,
audio_self_attention_mask, use_a2v_cross_attention, use_v2a_cross_attention, perturbation_mask and all_perturbed,
which no stored version of transformer_ltx2.py's LTX2VideoTransformerBlock.forward accepts (0528fde and 5de950c both
stop at a2v/v2a_cross_attention_mask: with them the upstream call raises TypeError). The newer upstream block that
JoyAI was written against is reproduced here from two public derivatives that mirror it (nunchaku-lite's
_ltx2_block_forward and a fork's LTX2VideoTransformerBlock.forward): identical to 0528fde's block except that
attn1 gets attention_mask=self_attention_mask, audio_attn1 gets attention_mask=audio_self_attention_mask, and the
a2v/v2a section runs under `if use_a2v_cross_attention or use_v2a_cross_attention` with each half under its own
flag (both True here: isolate_modalities=False), the perturbed processor only where perturbed_attn (False here).

The construct: paired audio-video memory for multi-shot generation, carried by masks. The audio self-attention mask
arrives multiplicative [B, T_a, T_a] (0/1 float) and becomes an additive (1 − m)·(−10000) bias (no unsqueeze: the
processor's prepare_attention_mask repeat-interleaves it over the heads along dim 0 and views it [B, H, T_a, T_a]);
the audio-to-video [B, T_v, T_a] and video-to-audio [B, T_a, T_v] masks arrive bool (True attends) and reach SDPA as
bool masks the same way; the caption mask [B, S] becomes (1 − m)·(−10000) unsqueezed to [B, 1, S] as in LTX-2.

Pipeline: diffusers' JoyAIEchoPipeline at 14726b2 is a placeholder (`pass`), and pipeline_joyai_echo_original_
checkpoint.py at 9d9f28d runs the original release code (ltx_distillation), not this class. The call here is
therefore LTX2Pipeline's (see ltx2.py): packed video and audio latents, the two projected captions and their mask,
timestep σ·1000 expanded to the batch, the coordinates made once by the rope modules' prepare_*_coords; plus a memory
layout in the masks: video rows [1 memory frame (4 tokens) | 2 target frames (8)], audio rows [2 memory | 4 target],
the audio self mask block-diagonal over (memory, target), a2v/v2a pairing memory with memory and target with target.
All rows are stepped by the loop alike (x ← x + (σ[i+1] − σ[i])·v per stream); how the release pipeline pins the
memory rows is not in diffusers.

usage: /usr/bin/python3 bench/unseen/replicas/joyai_echo.py OUTDIR
"""
import os
import sys

import torch

import ltx2
from ltx2 import deflate
from run import SIGMAS, _bf16, _to, place
import zflow_capture
from weights import randomize


class LTX2VideoTransformerBlock(ltx2.LTX2VideoTransformerBlock):
    """The newer upstream block's forward (see the docstring): 0528fde's plus the self-attention masks and the
    modality flags."""

    perturbed_attn = False
    video_cross_attn_adaln = False
    audio_cross_attn_adaln = False
    cross_attn_adaln = False

    def forward(self, hidden_states, audio_hidden_states, encoder_hidden_states, audio_encoder_hidden_states, temb,
                temb_audio, temb_ca_scale_shift, temb_ca_audio_scale_shift, temb_ca_gate, temb_ca_audio_gate,
                temb_prompt=None, temb_prompt_audio=None, video_rotary_emb=None, audio_rotary_emb=None,
                ca_video_rotary_emb=None, ca_audio_rotary_emb=None, encoder_attention_mask=None,
                audio_encoder_attention_mask=None, self_attention_mask=None, audio_self_attention_mask=None,
                a2v_cross_attention_mask=None, v2a_cross_attention_mask=None, use_a2v_cross_attention=True,
                use_v2a_cross_attention=True, perturbation_mask=None, all_perturbed=None):
        assert not (self.perturbed_attn or self.cross_attn_adaln)
        batch_size = hidden_states.size(0)

        # 1.1. Video Self-Attention
        video_ada_params = self.get_mod_params(self.scale_shift_table, temb, batch_size)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = video_ada_params[:6]
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        video_self_attn_args = {"hidden_states": norm_hidden_states, "encoder_hidden_states": None,
                                "query_rotary_emb": video_rotary_emb, "attention_mask": self_attention_mask}
        attn_hidden_states = self.attn1(**video_self_attn_args)
        hidden_states = hidden_states + attn_hidden_states * gate_msa

        # 1.2. Audio Self-Attention
        audio_ada_params = self.get_mod_params(self.audio_scale_shift_table, temb_audio, batch_size)
        audio_shift_msa, audio_scale_msa, audio_gate_msa, audio_shift_mlp, audio_scale_mlp, audio_gate_mlp = (
            audio_ada_params[:6])
        norm_audio_hidden_states = self.audio_norm1(audio_hidden_states)
        norm_audio_hidden_states = norm_audio_hidden_states * (1 + audio_scale_msa) + audio_shift_msa
        audio_self_attn_args = {"hidden_states": norm_audio_hidden_states, "encoder_hidden_states": None,
                                "query_rotary_emb": audio_rotary_emb, "attention_mask": audio_self_attention_mask}
        attn_audio_hidden_states = self.audio_attn1(**audio_self_attn_args)
        audio_hidden_states = audio_hidden_states + attn_audio_hidden_states * audio_gate_msa

        # 2.1. Video-Text Cross-Attention
        norm_hidden_states = self.norm2(hidden_states)
        attn_hidden_states = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                        query_rotary_emb=None, attention_mask=encoder_attention_mask)
        hidden_states = hidden_states + attn_hidden_states

        # 2.2. Audio-Text Cross-Attention
        norm_audio_hidden_states = self.audio_norm2(audio_hidden_states)
        attn_audio_hidden_states = self.audio_attn2(norm_audio_hidden_states,
                                                    encoder_hidden_states=audio_encoder_hidden_states,
                                                    query_rotary_emb=None, attention_mask=audio_encoder_attention_mask)
        audio_hidden_states = audio_hidden_states + attn_audio_hidden_states

        # 3. Audio-to-Video (a2v) and Video-to-Audio (v2a) Cross-Attention
        if use_a2v_cross_attention or use_v2a_cross_attention:
            norm_hidden_states = self.audio_to_video_norm(hidden_states)
            norm_audio_hidden_states = self.video_to_audio_norm(audio_hidden_states)

            video_per_layer_ca_scale_shift = self.video_a2v_cross_attn_scale_shift_table[:4, :]
            video_per_layer_ca_gate = self.video_a2v_cross_attn_scale_shift_table[4:, :]
            video_ca_ada_params = self.get_mod_params(video_per_layer_ca_scale_shift, temb_ca_scale_shift, batch_size)
            video_ca_gate_param = self.get_mod_params(video_per_layer_ca_gate, temb_ca_gate, batch_size)
            video_a2v_ca_scale, video_a2v_ca_shift, video_v2a_ca_scale, video_v2a_ca_shift = video_ca_ada_params
            a2v_gate = video_ca_gate_param[0].squeeze(2)

            audio_per_layer_ca_scale_shift = self.audio_a2v_cross_attn_scale_shift_table[:4, :]
            audio_per_layer_ca_gate = self.audio_a2v_cross_attn_scale_shift_table[4:, :]
            audio_ca_ada_params = self.get_mod_params(audio_per_layer_ca_scale_shift, temb_ca_audio_scale_shift,
                                                      batch_size)
            audio_ca_gate_param = self.get_mod_params(audio_per_layer_ca_gate, temb_ca_audio_gate, batch_size)
            audio_a2v_ca_scale, audio_a2v_ca_shift, audio_v2a_ca_scale, audio_v2a_ca_shift = audio_ca_ada_params
            v2a_gate = audio_ca_gate_param[0].squeeze(2)

            # 3.2. Audio-to-Video Cross Attention: Q: Video; K,V: Audio
            if use_a2v_cross_attention:
                mod_norm_hidden_states = norm_hidden_states * (
                    1 + video_a2v_ca_scale.squeeze(2)) + video_a2v_ca_shift.squeeze(2)
                mod_norm_audio_hidden_states = norm_audio_hidden_states * (
                    1 + audio_a2v_ca_scale.squeeze(2)) + audio_a2v_ca_shift.squeeze(2)
                a2v_attn_hidden_states = self.audio_to_video_attn(
                    mod_norm_hidden_states, encoder_hidden_states=mod_norm_audio_hidden_states,
                    query_rotary_emb=ca_video_rotary_emb, key_rotary_emb=ca_audio_rotary_emb,
                    attention_mask=a2v_cross_attention_mask)
                hidden_states = hidden_states + a2v_gate * a2v_attn_hidden_states

            # 3.3. Video-to-Audio Cross Attention: Q: Audio; K,V: Video
            if use_v2a_cross_attention:
                mod_norm_hidden_states = norm_hidden_states * (
                    1 + video_v2a_ca_scale.squeeze(2)) + video_v2a_ca_shift.squeeze(2)
                mod_norm_audio_hidden_states = norm_audio_hidden_states * (
                    1 + audio_v2a_ca_scale.squeeze(2)) + audio_v2a_ca_shift.squeeze(2)
                v2a_attn_hidden_states = self.video_to_audio_attn(
                    mod_norm_audio_hidden_states, encoder_hidden_states=mod_norm_hidden_states,
                    query_rotary_emb=ca_audio_rotary_emb, key_rotary_emb=ca_video_rotary_emb,
                    attention_mask=v2a_cross_attention_mask)
                audio_hidden_states = audio_hidden_states + v2a_gate * v2a_attn_hidden_states

        # 4. Feedforward
        norm_hidden_states = self.norm3(hidden_states) * (1 + scale_mlp) + shift_mlp
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + ff_output * gate_mlp

        norm_audio_hidden_states = self.audio_norm3(audio_hidden_states) * (1 + audio_scale_mlp) + audio_shift_mlp
        audio_ff_output = self.audio_ff(norm_audio_hidden_states)
        audio_hidden_states = audio_hidden_states + audio_ff_output * audio_gate_mlp
        return hidden_states, audio_hidden_states


class _Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class JoyAIEchoTransformer3DModel(ltx2.LTX2VideoTransformer3DModel):
    """LTX2VideoTransformer3DModel's modules unchanged (the blocks given the newer block forward); forward is
    JoyAI-Echo's."""

    def __init__(self, **kw):
        super().__init__(**kw)
        for block in self.transformer_blocks:
            block.__class__ = LTX2VideoTransformerBlock  # same parameters; the newer forward
        self.prompt_modulation = False  # cross_attn_mod or audio_cross_attn_mod, both False (LTX-2.0)
        self.config = _Config(cross_attn_timestep_scale_multiplier=self.cross_attn_timestep_scale_multiplier,
                              timestep_scale_multiplier=self.timestep_scale_multiplier, use_prompt_embeddings=True)

    def forward(self, hidden_states, audio_hidden_states, encoder_hidden_states, audio_encoder_hidden_states,
                timestep, audio_timestep=None, sigma=None, audio_sigma=None, encoder_attention_mask=None,
                audio_encoder_attention_mask=None, num_frames=None, height=None, width=None, fps=24.0,
                audio_num_frames=None, video_coords=None, audio_coords=None, isolate_modalities=False,
                spatio_temporal_guidance_blocks=None, perturbation_mask=None, use_cross_timestep=False,
                attention_kwargs=None, video_self_attention_mask=None, audio_self_attention_mask=None,
                a2v_cross_attention_mask=None, v2a_cross_attention_mask=None, return_dict=True):
        audio_timestep = audio_timestep if audio_timestep is not None else timestep
        audio_sigma = audio_sigma if audio_sigma is not None else sigma

        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)

        if audio_encoder_attention_mask is not None and audio_encoder_attention_mask.ndim == 2:
            audio_encoder_attention_mask = (1 - audio_encoder_attention_mask.to(audio_hidden_states.dtype)) * -10000.0
            audio_encoder_attention_mask = audio_encoder_attention_mask.unsqueeze(1)

        if video_self_attention_mask is not None:
            video_self_attention_mask = (1 - video_self_attention_mask.to(hidden_states.dtype)) * -10000.0

        if audio_self_attention_mask is not None:
            audio_self_attention_mask = (1 - audio_self_attention_mask.to(audio_hidden_states.dtype)) * -10000.0

        batch_size = hidden_states.size(0)

        # 1. Prepare RoPE positional embeddings
        if video_coords is None:
            video_coords = self.rope.prepare_video_coords(batch_size, num_frames, height, width,
                                                          hidden_states.device, fps=fps)
        if audio_coords is None:
            audio_coords = self.audio_rope.prepare_audio_coords(batch_size, audio_num_frames,
                                                                audio_hidden_states.device)

        video_rotary_emb = self.rope(video_coords, device=hidden_states.device)
        audio_rotary_emb = self.audio_rope(audio_coords, device=audio_hidden_states.device)

        video_cross_attn_rotary_emb = self.cross_attn_rope(video_coords[:, 0:1, :], device=hidden_states.device)
        audio_cross_attn_rotary_emb = self.cross_attn_audio_rope(audio_coords[:, 0:1, :],
                                                                 device=audio_hidden_states.device)

        # 2. Patchify input projections
        hidden_states = self.proj_in(hidden_states)
        audio_hidden_states = self.audio_proj_in(audio_hidden_states)

        # 3. Prepare timestep embeddings and modulation parameters
        timestep_cross_attn_gate_scale_factor = (
            self.config.cross_attn_timestep_scale_multiplier / self.config.timestep_scale_multiplier)

        temb, embedded_timestep = self.time_embed(timestep.flatten(), batch_size=batch_size,
                                                  hidden_dtype=hidden_states.dtype)
        temb = temb.view(batch_size, -1, temb.size(-1))
        embedded_timestep = embedded_timestep.view(batch_size, -1, embedded_timestep.size(-1))

        temb_audio, audio_embedded_timestep = self.audio_time_embed(audio_timestep.flatten(), batch_size=batch_size,
                                                                    hidden_dtype=audio_hidden_states.dtype)
        temb_audio = temb_audio.view(batch_size, -1, temb_audio.size(-1))
        audio_embedded_timestep = audio_embedded_timestep.view(batch_size, -1, audio_embedded_timestep.size(-1))

        if self.prompt_modulation:
            raise NotImplementedError("LTX-2.3 prompt modulation: not in this replica (LTX-2.0 defaults)")
        else:
            temb_prompt = temb_prompt_audio = None

        # 3.2. Prepare global modality cross attention modulation parameters
        video_ca_timestep = audio_sigma.flatten() if use_cross_timestep else timestep.flatten()
        video_cross_attn_scale_shift, _ = self.av_cross_attn_video_scale_shift(
            video_ca_timestep, batch_size=batch_size, hidden_dtype=hidden_states.dtype)
        video_cross_attn_a2v_gate, _ = self.av_cross_attn_video_a2v_gate(
            video_ca_timestep * timestep_cross_attn_gate_scale_factor, batch_size=batch_size,
            hidden_dtype=hidden_states.dtype)
        video_cross_attn_scale_shift = video_cross_attn_scale_shift.view(
            batch_size, -1, video_cross_attn_scale_shift.shape[-1])
        video_cross_attn_a2v_gate = video_cross_attn_a2v_gate.view(batch_size, -1, video_cross_attn_a2v_gate.shape[-1])

        audio_ca_timestep = sigma.flatten() if use_cross_timestep else audio_timestep.flatten()
        audio_cross_attn_scale_shift, _ = self.av_cross_attn_audio_scale_shift(
            audio_ca_timestep, batch_size=batch_size, hidden_dtype=audio_hidden_states.dtype)
        audio_cross_attn_v2a_gate, _ = self.av_cross_attn_audio_v2a_gate(
            audio_ca_timestep * timestep_cross_attn_gate_scale_factor, batch_size=batch_size,
            hidden_dtype=audio_hidden_states.dtype)
        audio_cross_attn_scale_shift = audio_cross_attn_scale_shift.view(
            batch_size, -1, audio_cross_attn_scale_shift.shape[-1])
        audio_cross_attn_v2a_gate = audio_cross_attn_v2a_gate.view(batch_size, -1, audio_cross_attn_v2a_gate.shape[-1])

        # 4. Prepare prompt embeddings
        if self.config.use_prompt_embeddings:
            encoder_hidden_states = self.caption_projection(encoder_hidden_states)
            encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.size(-1))
            audio_encoder_hidden_states = self.audio_caption_projection(audio_encoder_hidden_states)
            audio_encoder_hidden_states = audio_encoder_hidden_states.view(batch_size, -1,
                                                                           audio_hidden_states.size(-1))

        # 5. Run transformer blocks
        spatio_temporal_guidance_blocks = spatio_temporal_guidance_blocks or []
        if len(spatio_temporal_guidance_blocks) > 0 and perturbation_mask is None:
            perturbation_mask = torch.zeros((batch_size,))
        if perturbation_mask is not None and perturbation_mask.ndim == 1:
            perturbation_mask = perturbation_mask[:, None, None]
        all_perturbed = torch.all(perturbation_mask == 0) if perturbation_mask is not None else False
        stg_blocks = set(spatio_temporal_guidance_blocks)

        for block_idx, block in enumerate(self.transformer_blocks):
            block_perturbation_mask = perturbation_mask if block_idx in stg_blocks else None
            block_all_perturbed = all_perturbed if block_idx in stg_blocks else False
            hidden_states, audio_hidden_states = block(
                hidden_states=hidden_states, audio_hidden_states=audio_hidden_states,
                encoder_hidden_states=encoder_hidden_states, audio_encoder_hidden_states=audio_encoder_hidden_states,
                temb=temb, temb_audio=temb_audio, temb_ca_scale_shift=video_cross_attn_scale_shift,
                temb_ca_audio_scale_shift=audio_cross_attn_scale_shift, temb_ca_gate=video_cross_attn_a2v_gate,
                temb_ca_audio_gate=audio_cross_attn_v2a_gate, temb_prompt=temb_prompt,
                temb_prompt_audio=temb_prompt_audio, video_rotary_emb=video_rotary_emb,
                audio_rotary_emb=audio_rotary_emb, ca_video_rotary_emb=video_cross_attn_rotary_emb,
                ca_audio_rotary_emb=audio_cross_attn_rotary_emb, encoder_attention_mask=encoder_attention_mask,
                audio_encoder_attention_mask=audio_encoder_attention_mask,
                self_attention_mask=video_self_attention_mask, audio_self_attention_mask=audio_self_attention_mask,
                a2v_cross_attention_mask=a2v_cross_attention_mask, v2a_cross_attention_mask=v2a_cross_attention_mask,
                use_a2v_cross_attention=not isolate_modalities, use_v2a_cross_attention=not isolate_modalities,
                perturbation_mask=block_perturbation_mask, all_perturbed=block_all_perturbed)

        # 6. Output layers
        scale_shift_values = self.scale_shift_table[None, None] + embedded_timestep[:, :, None]
        shift, scale = scale_shift_values[:, :, 0], scale_shift_values[:, :, 1]
        hidden_states = self.norm_out(hidden_states)
        hidden_states = hidden_states * (1 + scale) + shift
        output = self.proj_out(hidden_states)

        audio_scale_shift_values = self.audio_scale_shift_table[None, None] + audio_embedded_timestep[:, :, None]
        audio_shift, audio_scale = audio_scale_shift_values[:, :, 0], audio_scale_shift_values[:, :, 1]
        audio_hidden_states = self.audio_norm_out(audio_hidden_states)
        audio_hidden_states = audio_hidden_states * (1 + audio_scale) + audio_shift
        audio_output = self.audio_proj_out(audio_hidden_states)
        return (output, audio_output)


# ltx2.py's small sizes: video 2 heads of 8, audio 2 heads of 4, two blocks, 8 latent channels each stream, a
# 4-token caption 12 wide (the last masked). Video: 1 memory frame + 2 target frames of 2×2; audio: 2 memory + 4
# target latent frames.
MEM_FRAMES, FRAMES, HEIGHT, WIDTH, MEM_AUDIO, AUDIO_FRAMES, FPS = 1, 2, 2, 2, 2, 4, 24.0


def build(layers=2):
    return JoyAIEchoTransformer3DModel(
        in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=8, cross_attention_dim=16,
        audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2, audio_attention_head_dim=4,
        audio_cross_attention_dim=8, num_layers=layers, caption_channels=12)


def inputs(model, g):
    frames, audio_frames = MEM_FRAMES + FRAMES, MEM_AUDIO + AUDIO_FRAMES
    tv, ta = frames * HEIGHT * WIDTH, audio_frames
    mem_v = torch.arange(tv) < MEM_FRAMES * HEIGHT * WIDTH  # memory video rows
    mem_a = torch.arange(ta) < MEM_AUDIO  # memory audio rows
    mask = torch.ones(1, 4, dtype=torch.int64)
    mask[:, 3:] = 0
    a2v = (mem_v[:, None] == mem_a[None, :])[None]  # [1, T_v, T_a] bool: memory↔memory, target↔target
    return {
        "prompt_embeds": torch.randn((1, 4, 12), generator=g),
        "audio_prompt_embeds": torch.randn((1, 4, 12), generator=g),
        "prompt_attention_mask": mask,
        "audio_self_attention_mask": (mem_a[:, None] == mem_a[None, :]).float()[None],  # [1, T_a, T_a] 0/1
        "a2v_cross_attention_mask": a2v,
        "v2a_cross_attention_mask": a2v.transpose(1, 2).contiguous(),  # [1, T_a, T_v]
        "video_coords": model.rope.prepare_video_coords(1, frames, HEIGHT, WIDTH, "cpu", fps=FPS),
        "audio_coords": model.audio_rope.prepare_audio_coords(1, audio_frames, "cpu"),
        "noise": torch.randn((1, tv, 8), generator=g),
        "audio_noise": torch.randn((1, ta, 8), generator=g),
    }


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_joyai_echo.py@9d9f28d2e7f4 over "
                   "transformer_ltx2.py@0528fde41dbd (ltx2.py) with the newer upstream block's mask routing "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 expanded to the batch, the same for both latents (as LTX2Pipeline; diffusers' "
             "JoyAIEchoPipeline is a placeholder)",
    velocity="two model outputs as they are: out.0 steps the video latents, out.1 the audio latents, each "
             "x + (sigma[i+1] - sigma[i])·v",
    note="JoyAI-Echo = LTX-2.0 audio-video DiT (two blocks) with paired memory masks: audio self-attention under "
         "(1 - m)·(-10000) from a multiplicative [1, 6, 6] 0/1 mask (block-diagonal memory 2 / target 4), repeated "
         "over heads; a2v [1, 12, 6] and v2a [1, 6, 12] bool masks (True attends) pairing memory video rows (first "
         "4) with memory audio rows (first 2) and target with target; video self-attention unmasked; caption mask "
         "(1 - m)·(-10000) as [1, 1, 4]; otherwise LTX-2.0 as in ltx2.py")


def main(outdir, layers=2):
    """ltx2.py's loop: both latents passed to one call per step, each updated by its own velocity."""
    torch.manual_seed(0)
    model = build(layers)
    randomize(model, torch.Generator().manual_seed(1))
    model = model.eval()
    cond = inputs(model, torch.Generator().manual_seed(2))
    x, a = cond.pop("noise"), cond.pop("audio_noise")
    tag = os.environ.get("REPLICA_DTYPE", "f32")
    device = os.environ.get("REPLICA_DEVICE", "cpu")
    if tag == "bf16":
        model = place(model, torch.bfloat16, device)
        cond = {k: v if "coords" in k else _bf16(k, v) for k, v in cond.items()}
        x, a = x.to(torch.bfloat16), a.to(torch.bfloat16)
    elif tag != "f32":
        raise SystemExit(f"REPLICA_DTYPE={tag}: f32 or bf16")
    if device != "cpu":
        if tag != "bf16":
            raise SystemExit("REPLICA_DEVICE: for the bf16 run only (the f32 reference runs on the CPU)")
        cond = {k: _to(v, device) for k, v in cond.items()}
        x, a = x.to(device), a.to(device)
        torch.set_default_device(device)
    path = os.path.join(outdir, f"joyai_echo-{tag}.npz")
    prod = dict(PRODUCER, case="joyai_echo", library="replica", placement="hf")
    frames, audio_frames = MEM_FRAMES + FRAMES, MEM_AUDIO + AUDIO_FRAMES
    with zflow_capture.Capture(model, name="transformer", path=path, producer=prod) as cap:
        for k, v in cond.items():
            cap.input(k, v)
        cap.input("noise", x)
        cap.input("audio_noise", a)
        cap.input("sigmas", torch.tensor(SIGMAS, dtype=torch.float32, device=x.device))
        with torch.no_grad():
            for i in range(len(SIGMAS) - 1):
                with cap.step(i):
                    t = torch.tensor([SIGMAS[i] * 1000.0], dtype=torch.float32, device=x.device).expand(x.shape[0])
                    v, va = model(
                        hidden_states=x, audio_hidden_states=a, encoder_hidden_states=cond["prompt_embeds"],
                        audio_encoder_hidden_states=cond["audio_prompt_embeds"], timestep=t,
                        encoder_attention_mask=cond["prompt_attention_mask"],
                        audio_encoder_attention_mask=cond["prompt_attention_mask"], num_frames=frames, height=HEIGHT,
                        width=WIDTH, fps=FPS, audio_num_frames=audio_frames, video_coords=cond["video_coords"],
                        audio_coords=cond["audio_coords"],
                        audio_self_attention_mask=cond["audio_self_attention_mask"],
                        a2v_cross_attention_mask=cond["a2v_cross_attention_mask"],
                        v2a_cross_attention_mask=cond["v2a_cross_attention_mask"], return_dict=False)
                x = x + (SIGMAS[i + 1] - SIGMAS[i]) * v.to(x.dtype)
                a = a + (SIGMAS[i + 1] - SIGMAS[i]) * va.to(a.dtype)
        cap.output("latents", x)
        cap.output("audio_latents", a)
    deflate(path)
    print(f"joyai_echo: {cap.summary['calls']} calls -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main(sys.argv[1])
