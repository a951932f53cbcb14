"""Lens text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_lens.py at
dca79214f5f86fd58db6660c53cc97c8304323d3 (LensTransformer2DModel, LensTransformerBlock, LensJointAttention with
LensDoubleStreamAttnProcessor's __call__ as its forward, GateMLP, LensTimestepProjEmbeddings, LensEmbedRope,
apply_rotary_emb_lens) with the parts it imports: embeddings.py (Timesteps, TimestepEmbedding), normalization.py
(RMSNorm, AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call boundaries; the
arithmetic line for line. Stand-ins for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D],
default scale, the additive float mask added in the scores' dtype, as SDPA's math path does). LensEmbedRope's
lru_cache is left out (it changes no value).

The constructs it shows: a dual-stream MMDiT whose joint sequence is [image, text] (image rows first); one fused
qkv Linear per stream viewed [B, L, 3, heads, head_dim] (q, k, v interleaved per head, not three contiguous thirds);
per-head RMSNorm q/k (and added q/k); complex RoPE (torch.polar tables, pairs interleaved) over scale_rope-centred
frame/height/width positions for the image and positions after the largest half-side for the text; the caption given
as several text-encoder layers, each RMS-normed by its own norm, joined along the channels, then one Linear;
modulation per stream silu → Linear(6D) split into two (shift, scale, gate) halves; RMSNorm block norms (γ); a SwiGLU
GateMLP (w2(silu(w1 x) · w3 x), hidden int(D/3·8)); an additive float mask (0 / -inf) over [image ones, caption mask];
the blocks return (text, image); AdaLayerNormContinuous (scale, shift) output norm; Timesteps(256, flip, shift 0,
scale 1000).

Pipeline: none published with this commit; called as the Qwen-Image family's pipeline calls its model, which this
file's RoPE and layout follow: latents packed 2x2 (B, C, H, W) -> (B, H/2·W/2, 4C), timestep = t / 1000 with
t = σ·1000 (the model scales by 1000 again), img_shapes [(1, H/2, W/2)], the caption's bool mask, velocity the output
as is.

usage: /usr/bin/python3 bench/unseen/replicas/lens.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture
from parts import TimestepEmbedding, Timesteps


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True)."""

    def __init__(self, dim, eps, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


def dispatch_attention_fn(query, key, value, attn_mask=None):
    """SDPA's math on [B, L, H, D], default scale; a float mask added to the scores in their dtype."""
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    s = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
    if attn_mask is not None:
        s = s + attn_mask.to(s.dtype)
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


def apply_rotary_emb_lens(x, freqs_cis):
    x_complex = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(1)
    x_out = torch.view_as_real(x_complex * freqs_cis).flatten(3)
    return x_out.type_as(x)


class GateMLP(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LensTimestepProjEmbeddings(nn.Module):
    def __init__(self, embedding_dim):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, hidden_states):
        proj = self.time_proj(timestep)
        return self.timestep_embedder(proj.to(dtype=hidden_states.dtype))


class LensEmbedRope(nn.Module):
    def __init__(self, theta, axes_dim, scale_rope=False):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim
        self.scale_rope = scale_rope
        pos_index = torch.arange(4096)
        neg_index = torch.arange(4096).flip(0) * -1 - 1
        self.register_buffer("pos_freqs", torch.cat([self._rope_params(pos_index, d, theta) for d in axes_dim], dim=1),
                             persistent=False)
        self.register_buffer("neg_freqs", torch.cat([self._rope_params(neg_index, d, theta) for d in axes_dim], dim=1),
                             persistent=False)

    @staticmethod
    def _rope_params(index, dim, theta=10000):
        assert dim % 2 == 0
        freqs = torch.outer(index, 1.0 / torch.pow(theta, torch.arange(0, dim, 2).float().div(dim)))
        return torch.polar(torch.ones_like(freqs), freqs)

    def _get_device_freqs(self, device):
        return self.pos_freqs.to(device), self.neg_freqs.to(device)

    def forward(self, video_fhw, txt_seq_len, device=None):
        if isinstance(video_fhw, list):
            video_fhw = video_fhw[0]
        if not isinstance(video_fhw, list):
            video_fhw = [video_fhw]
        vid_freqs = []
        max_vid_index = 0
        for idx, fhw in enumerate(video_fhw):
            frame, height, width = fhw
            video_freq = self._compute_video_freqs(frame, height, width, idx, device)
            vid_freqs.append(video_freq)
            if self.scale_rope:
                max_vid_index = max(height // 2, width // 2, max_vid_index)
            else:
                max_vid_index = max(height, width, max_vid_index)
        max_txt_seq_len_int = int(txt_seq_len)
        pos_freqs_device, _ = self._get_device_freqs(device)
        txt_freqs = pos_freqs_device[max_vid_index: max_vid_index + max_txt_seq_len_int, ...]
        vid_freqs = torch.cat(vid_freqs, dim=0)
        return vid_freqs, txt_freqs

    def _compute_video_freqs(self, frame, height, width, idx=0, device=None):
        seq_lens = frame * height * width
        pos_freqs, neg_freqs = (self._get_device_freqs(device) if device is not None
                                else (self.pos_freqs, self.neg_freqs))
        freqs_pos = pos_freqs.split([d // 2 for d in self.axes_dim], dim=1)
        freqs_neg = neg_freqs.split([d // 2 for d in self.axes_dim], dim=1)
        freqs_frame = freqs_pos[0][idx: idx + frame].view(frame, 1, 1, -1).expand(frame, height, width, -1)
        if self.scale_rope:
            freqs_height = torch.cat([freqs_neg[1][-(height - height // 2):], freqs_pos[1][: height // 2]], dim=0)
            freqs_height = freqs_height.view(1, height, 1, -1).expand(frame, height, width, -1)
            freqs_width = torch.cat([freqs_neg[2][-(width - width // 2):], freqs_pos[2][: width // 2]], dim=0)
            freqs_width = freqs_width.view(1, 1, width, -1).expand(frame, height, width, -1)
        else:
            freqs_height = freqs_pos[1][:height].view(1, height, 1, -1).expand(frame, height, width, -1)
            freqs_width = freqs_pos[2][:width].view(1, 1, width, -1).expand(frame, height, width, -1)
        freqs = torch.cat([freqs_frame, freqs_height, freqs_width], dim=-1).reshape(seq_lens, -1)
        return freqs.clone().contiguous()


class LensJointAttention(nn.Module):
    """With LensDoubleStreamAttnProcessor's __call__ as its forward."""

    def __init__(self, query_dim, added_kv_proj_dim, dim_head=64, heads=8, out_dim=None, eps=1e-5):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.heads = self.inner_dim // dim_head
        self.dim_head = dim_head
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.norm_q = RMSNorm(dim_head, eps=eps)
        self.norm_k = RMSNorm(dim_head, eps=eps)
        self.norm_added_q = RMSNorm(dim_head, eps=eps)
        self.norm_added_k = RMSNorm(dim_head, eps=eps)
        self.img_qkv = nn.Linear(query_dim, 3 * self.inner_dim, bias=True)
        self.txt_qkv = nn.Linear(added_kv_proj_dim, 3 * self.inner_dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=True), nn.Identity()])
        self.to_add_out = nn.Linear(self.inner_dim, query_dim, bias=True)

    def forward(self, hidden_states, encoder_hidden_states, image_rotary_emb=None, attention_mask=None):
        attn = self
        bsz, seq_img, _ = hidden_states.shape
        seq_txt = encoder_hidden_states.shape[1]
        img_qkv = attn.img_qkv(hidden_states).view(bsz, seq_img, 3, attn.heads, attn.dim_head)
        txt_qkv = attn.txt_qkv(encoder_hidden_states).view(bsz, seq_txt, 3, attn.heads, attn.dim_head)
        img_q, img_k, img_v = img_qkv.unbind(dim=2)
        txt_q, txt_k, txt_v = txt_qkv.unbind(dim=2)
        img_q = attn.norm_q(img_q)
        img_k = attn.norm_k(img_k)
        txt_q = attn.norm_added_q(txt_q)
        txt_k = attn.norm_added_k(txt_k)
        if image_rotary_emb is not None:
            img_freqs, txt_freqs = image_rotary_emb
            img_freqs = img_freqs[:seq_img]
            img_q = apply_rotary_emb_lens(img_q, img_freqs)
            img_k = apply_rotary_emb_lens(img_k, img_freqs)
            if seq_txt > 0:
                txt_freqs = txt_freqs[:seq_txt]
                txt_q = apply_rotary_emb_lens(txt_q, txt_freqs)
                txt_k = apply_rotary_emb_lens(txt_k, txt_freqs)
        joint_query = torch.cat([img_q, txt_q], dim=1)
        joint_key = torch.cat([img_k, txt_k], dim=1)
        joint_value = torch.cat([img_v, txt_v], dim=1)
        joint_hidden_states = dispatch_attention_fn(joint_query, joint_key, joint_value, attn_mask=attention_mask)
        joint_hidden_states = joint_hidden_states.flatten(2, 3)
        joint_hidden_states = joint_hidden_states.to(joint_query.dtype)
        img_attn_output = joint_hidden_states[:, :seq_img, :]
        txt_attn_output = joint_hidden_states[:, seq_img:, :]
        img_attn_output = attn.to_out[0](img_attn_output.contiguous())
        if len(attn.to_out) > 1:
            img_attn_output = attn.to_out[1](img_attn_output)
        txt_attn_output = attn.to_add_out(txt_attn_output.contiguous())
        return img_attn_output, txt_attn_output


class LensTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, eps=1e-6, rms_norm=False, gate_mlp=False):
        super().__init__()
        self.attn = LensJointAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                       heads=num_attention_heads, out_dim=dim, eps=eps)
        assert rms_norm and gate_mlp  # the defaults of LensTransformer2DModel

        def norm_cls(d):
            return RMSNorm(d, eps=eps)

        def mlp_cls():
            return GateMLP(dim, int(dim / 3 * 8))

        self.img_mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim, bias=True))
        self.img_norm1 = norm_cls(dim)
        self.img_norm2 = norm_cls(dim)
        self.img_mlp = mlp_cls()
        self.txt_mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim, bias=True))
        self.txt_norm1 = norm_cls(dim)
        self.txt_norm2 = norm_cls(dim)
        self.txt_mlp = mlp_cls()

    @staticmethod
    def _modulate(x, mod_params):
        shift, scale, gate = mod_params.chunk(3, dim=-1)
        return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1), gate.unsqueeze(1)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb, attention_mask=None,
                joint_attention_kwargs=None):
        img_mod1, img_mod2 = self.img_mod(temb).chunk(2, dim=-1)
        txt_mod1, txt_mod2 = self.txt_mod(temb).chunk(2, dim=-1)
        img_modulated, img_gate1 = self._modulate(self.img_norm1(hidden_states), img_mod1)
        txt_modulated, txt_gate1 = self._modulate(self.txt_norm1(encoder_hidden_states), txt_mod1)
        joint_attention_kwargs = dict(joint_attention_kwargs or {})
        block_attention_mask = joint_attention_kwargs.pop("attention_mask", attention_mask)
        img_attn, txt_attn = self.attn(hidden_states=img_modulated, encoder_hidden_states=txt_modulated,
                                       image_rotary_emb=image_rotary_emb, attention_mask=block_attention_mask,
                                       **joint_attention_kwargs)
        hidden_states = hidden_states + img_gate1 * img_attn
        encoder_hidden_states = encoder_hidden_states + txt_gate1 * txt_attn
        img_modulated2, img_gate2 = self._modulate(self.img_norm2(hidden_states), img_mod2)
        hidden_states = hidden_states + img_gate2 * self.img_mlp(img_modulated2)
        txt_modulated2, txt_gate2 = self._modulate(self.txt_norm2(encoder_hidden_states), txt_mod2)
        encoder_hidden_states = encoder_hidden_states + txt_gate2 * self.txt_mlp(txt_modulated2)
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)
        return encoder_hidden_states, hidden_states


class LensTransformer2DModel(nn.Module):
    _skip_layerwise_casting_patterns = ["pos_embed", "norm"]

    def __init__(self, patch_size=2, in_channels=128, out_channels=32, num_layers=48, attention_head_dim=64,
                 num_attention_heads=24, inner_dim=1536, enc_hidden_dim=2880, axes_dims_rope=(8, 28, 28),
                 gate_mlp=True, rms_norm=True, multi_layer_encoder_feature=True,
                 selected_layer_index=(5, 11, 17, 23)):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.multi_layer_encoder_feature = multi_layer_encoder_feature
        self.selected_layer_index = list(selected_layer_index)
        self.pos_embed = LensEmbedRope(theta=10000, axes_dim=list(axes_dims_rope), scale_rope=True)
        self.time_text_embed = LensTimestepProjEmbeddings(embedding_dim=self.inner_dim)
        assert multi_layer_encoder_feature
        self.txt_norm = nn.ModuleList([RMSNorm(enc_hidden_dim, eps=1e-5) for _ in self.selected_layer_index])
        self.txt_in = nn.Linear(enc_hidden_dim * len(self.selected_layer_index), self.inner_dim)
        self.img_in = nn.Linear(in_channels, self.inner_dim)
        self.transformer_blocks = nn.ModuleList([
            LensTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                 attention_head_dim=attention_head_dim, rms_norm=rms_norm, gate_mlp=gate_mlp)
            for _ in range(num_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states, encoder_hidden_states_mask=None, timestep=None,
                img_shapes=None, attention_kwargs=None, return_dict=True):
        bsz, img_len, _ = hidden_states.shape
        if len(encoder_hidden_states) != len(self.selected_layer_index):
            raise ValueError("one text feature layer per selected index")
        text_seq_len = encoder_hidden_states[0].shape[1]
        attention_mask = None
        if encoder_hidden_states_mask is not None:
            attention_mask = self._build_joint_attention_mask(encoder_hidden_states_mask, img_len)
        hidden_states = self.img_in(hidden_states)
        timestep = timestep.to(hidden_states.dtype)
        normed = [self.txt_norm[i](encoder_hidden_states[i]) for i in range(len(self.selected_layer_index))]
        encoder_hidden_states = torch.cat(normed, dim=-1)
        encoder_hidden_states = self.txt_in(encoder_hidden_states)
        temb = self.time_text_embed(timestep, hidden_states)
        image_rotary_emb = self.pos_embed(img_shapes, txt_seq_len=text_seq_len, device=hidden_states.device)
        block_attention_kwargs = attention_kwargs.copy() if attention_kwargs is not None else {}
        if attention_mask is not None:
            block_attention_kwargs["attention_mask"] = attention_mask
        for block in self.transformer_blocks:
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb,
                                                         joint_attention_kwargs=block_attention_kwargs)
        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)

    @staticmethod
    def _build_joint_attention_mask(text_mask, img_len):
        if text_mask.dtype != torch.bool:
            text_mask = text_mask.bool()
        bsz = text_mask.shape[0]
        img_ones = torch.ones((bsz, img_len), dtype=torch.bool, device=text_mask.device)
        joint = torch.cat([img_ones, text_mask], dim=1)
        additive = torch.zeros_like(joint, dtype=torch.float32)
        additive.masked_fill_(~joint, float("-inf"))
        return additive[:, None, None, :]


def build():
    # 2 heads of 16 (RoPE frame/height/width 4/6/6), 2 blocks; caption from 2 text-encoder layers of 16 channels;
    # 4 latent channels packed 2x2.
    return LensTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                                  num_attention_heads=2, inner_dim=32, enc_hidden_dim=16, axes_dims_rope=(4, 6, 6),
                                  gate_mlp=True, rms_norm=True, multi_layer_encoder_feature=True,
                                  selected_layer_index=(1, 3))


def inputs(g):
    lat = torch.randn((1, 4, 4, 8), generator=g)
    b, c, h, w = lat.shape
    packed = lat.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), c * 4)
    mask = torch.tensor([[True, True, True, True, True, False]])
    # one [B, S, D] tensor per selected text-encoder layer, stacked on a leading axis for the trace
    return {"encoder_hidden_states": torch.randn((2, 1, 6, 16), generator=g), "encoder_hidden_states_mask": mask,
            "noise": packed}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, encoder_hidden_states=list(c["encoder_hidden_states"].unbind(0)),
                 encoder_hidden_states_mask=c["encoder_hidden_states_mask"], timestep=t / 1000,
                 img_shapes=[(1, 2, 4)], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_lens.py@dca79214f5f8 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma float32 (t / 1000 of t = sigma*1000; the model's Timesteps scale by 1000)",
    velocity="model output as is (flow velocity), not negated",
    note="Lens dual-stream MMDiT, 2 blocks: joint attention over [image, text] (image rows first); one fused qkv "
         "Linear per stream viewed [B, L, 3, heads, head_dim]; per-head RMSNorm q/k and added q/k; complex RoPE "
         "(polar tables, interleaved pairs) over scale_rope-centred frame/height/width positions, text positions "
         "after max(h/2, w/2); caption = 2 text-encoder layers each RMS-normed by its own norm, joined on channels, "
         "one Linear; per-stream silu→Linear(6D) modulation, two (shift, scale, gate) halves, x·(1+scale)+shift; "
         "RMSNorm (γ) block norms; SwiGLU GateMLP w2(silu(w1 x)·w3 x); additive 0/-inf float mask over [image ones, "
         "caption mask]; AdaLayerNormContinuous (scale, shift) out; Timesteps(256, flip, shift 0, scale 1000)")

if __name__ == "__main__":
    capture("lens", build, inputs, call, sys.argv[1], PRODUCER)
