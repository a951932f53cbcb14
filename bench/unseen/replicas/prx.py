"""PRX (Photoroom) text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_prx.py at
d33f10298fb5afd085d2f8c409fa88cbf0615db3 (PRXTransformer2DModel, PRXBlock, PRXAttention with
PRXAttnProcessor2_0's __call__ as its forward, PRXEmbedND, MLPEmbedder, Modulation, FinalLayer) with the parts it
imports: normalization.py (RMSNorm) and embeddings.py (get_timestep_embedding): the same module tree, parameter
names and shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks:
dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, the bool mask). The construct it shows: every
block's queries are the image rows alone while its keys and values are [text, image] (the text projected by its
own txt_kv_proj, RMSNorm on its k only), so the text stream is never updated; RoPE as 2x2 rotation matrices on
the image q and k only; unfold/fold patches.

Pipeline as PRXPipeline calls it (bench/unseen/capture_dit.py's prx case, --small sizes): timestep sigma (the
model scales by time_factor 1000), the caption's 0/1 mask passed as attention_mask, velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/prx.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
from torch.nn.functional import fold, unfold

from run import capture, get_timestep_embedding, sdpa


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True), f32 weights."""

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


def get_image_ids(batch_size, height, width, patch_size, device):
    img_ids = torch.zeros(height // patch_size, width // patch_size, 2, device=device)
    img_ids[..., 0] = torch.arange(height // patch_size, device=device)[:, None]
    img_ids[..., 1] = torch.arange(width // patch_size, device=device)[None, :]
    return img_ids.reshape((height // patch_size) * (width // patch_size), 2).unsqueeze(0).repeat(batch_size, 1, 1)


def apply_rope(xq, freqs_cis):
    xq_ = xq.float().reshape(*xq.shape[:-1], -1, 1, 2)
    freqs_cis = freqs_cis.to(device=xq.device, dtype=xq_.dtype)
    xq_out = freqs_cis[..., 0] * xq_[..., 0] + freqs_cis[..., 1] * xq_[..., 1]
    return xq_out.reshape(*xq.shape).type_as(xq)


class PRXAttention(nn.Module):
    """With PRXAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, heads=8, dim_head=64, bias=False, out_bias=False, eps=1e-6):
        super().__init__()
        self.heads = heads
        self.head_dim = dim_head
        self.inner_dim = dim_head * heads
        self.query_dim = query_dim
        self.img_qkv_proj = nn.Linear(query_dim, query_dim * 3, bias=bias)
        self.norm_q = RMSNorm(self.head_dim, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(self.head_dim, eps=eps, elementwise_affine=True)
        self.txt_kv_proj = nn.Linear(query_dim, query_dim * 2, bias=bias)
        self.norm_added_k = RMSNorm(self.head_dim, eps=eps, elementwise_affine=True)
        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, query_dim, bias=out_bias))
        self.to_out.append(nn.Dropout(0.0))

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        attn = self
        img_qkv = attn.img_qkv_proj(hidden_states)
        B, L_img, _ = img_qkv.shape
        img_qkv = img_qkv.reshape(B, L_img, 3, attn.heads, attn.head_dim)
        img_qkv = img_qkv.permute(2, 0, 3, 1, 4)  # [3, B, H, L_img, D]
        img_q, img_k, img_v = img_qkv[0], img_qkv[1], img_qkv[2]
        img_q = attn.norm_q(img_q)
        img_k = attn.norm_k(img_k)

        txt_kv = attn.txt_kv_proj(encoder_hidden_states)
        B, L_txt, _ = txt_kv.shape
        txt_kv = txt_kv.reshape(B, L_txt, 2, attn.heads, attn.head_dim)
        txt_kv = txt_kv.permute(2, 0, 3, 1, 4)  # [2, B, H, L_txt, D]
        txt_k, txt_v = txt_kv[0], txt_kv[1]
        txt_k = attn.norm_added_k(txt_k)

        if image_rotary_emb is not None:
            img_q = apply_rope(img_q, image_rotary_emb)
            img_k = apply_rope(img_k, image_rotary_emb)

        k = torch.cat((txt_k, img_k), dim=2)  # [B, H, L_txt + L_img, D]
        v = torch.cat((txt_v, img_v), dim=2)

        attn_mask_tensor = None
        if attention_mask is not None:
            bs, _, l_img, _ = img_q.shape
            l_txt = txt_k.shape[2]
            ones_img = torch.ones((bs, l_img), dtype=torch.bool, device=img_q.device)
            attention_mask = attention_mask.to(device=img_q.device, dtype=torch.bool)
            joint_mask = torch.cat([attention_mask, ones_img], dim=-1)
            attn_mask_tensor = joint_mask[:, None, None, :].expand(-1, attn.heads, l_img, -1)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, bool mask.
        attn_output = sdpa(img_q, k, v, mask=attn_mask_tensor).transpose(1, 2)
        batch_size, seq_len, num_heads, head_dim = attn_output.shape
        attn_output = attn_output.reshape(batch_size, seq_len, num_heads * head_dim)
        attn_output = attn.to_out[0](attn_output)
        if len(attn.to_out) > 1:
            attn_output = attn.to_out[1](attn_output)
        return attn_output


class PRXEmbedND(nn.Module):
    def __init__(self, dim, theta, axes_dim):
        super().__init__()
        self.dim = dim
        self.theta = theta
        self.axes_dim = axes_dim

    def rope(self, pos, dim, theta):
        assert dim % 2 == 0
        scale = torch.arange(0, dim, 2, dtype=torch.float64, device=pos.device) / dim
        omega = 1.0 / (theta ** scale)
        out = pos.unsqueeze(-1) * omega.unsqueeze(0)
        out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
        out = out.reshape(*out.shape[:-1], 2, 2)
        return out.float()

    def forward(self, ids):
        n_axes = ids.shape[-1]
        emb = torch.cat([self.rope(ids[:, :, i], self.axes_dim[i], self.theta) for i in range(n_axes)], dim=-3)
        return emb.unsqueeze(1)


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim, hidden_dim):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden_dim, bias=True)
        self.silu = nn.SiLU()
        self.out_layer = nn.Linear(hidden_dim, hidden_dim, bias=True)

    def forward(self, x):
        return self.out_layer(self.silu(self.in_layer(x)))


class Modulation(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, 6 * dim, bias=True)
        nn.init.constant_(self.lin.weight, 0)
        nn.init.constant_(self.lin.bias, 0)

    def forward(self, vec):
        out = self.lin(nn.functional.silu(vec))[:, None, :].chunk(6, dim=-1)
        return tuple(out[:3]), tuple(out[3:])


class PRXBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, mlp_ratio=4.0, qk_scale=None):
        super().__init__()
        self.hidden_dim = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.scale = qk_scale or self.head_dim ** -0.5
        self.mlp_hidden_dim = int(hidden_size * mlp_ratio)
        self.hidden_size = hidden_size
        self.img_pre_norm = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attention = PRXAttention(query_dim=hidden_size, heads=num_heads, dim_head=self.head_dim, bias=False,
                                      out_bias=False, eps=1e-6)
        self.post_attention_layernorm = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.gate_proj = nn.Linear(hidden_size, self.mlp_hidden_dim, bias=False)
        self.up_proj = nn.Linear(hidden_size, self.mlp_hidden_dim, bias=False)
        self.down_proj = nn.Linear(self.mlp_hidden_dim, hidden_size, bias=False)
        self.mlp_act = nn.GELU(approximate="tanh")
        self.modulation = Modulation(hidden_size)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb, attention_mask=None):
        mod_attn, mod_mlp = self.modulation(temb)
        attn_shift, attn_scale, attn_gate = mod_attn
        mlp_shift, mlp_scale, mlp_gate = mod_mlp
        hidden_states_mod = (1 + attn_scale) * self.img_pre_norm(hidden_states) + attn_shift
        attn_out = self.attention(hidden_states=hidden_states_mod, encoder_hidden_states=encoder_hidden_states,
                                  attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + attn_gate * attn_out
        x = (1 + mlp_scale) * self.post_attention_layernorm(hidden_states) + mlp_shift
        hidden_states = hidden_states + mlp_gate * (self.down_proj(self.mlp_act(self.gate_proj(x)) * self.up_proj(x)))
        return hidden_states


class FinalLayer(nn.Module):
    def __init__(self, hidden_size, patch_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size, bias=True))

    def forward(self, x, vec):
        shift, scale = self.adaLN_modulation(vec).chunk(2, dim=1)
        x = (1 + scale[:, None, :]) * self.norm_final(x) + shift[:, None, :]
        return self.linear(x)


def img2seq(img, patch_size):
    return unfold(img, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


def seq2img(seq, patch_size, shape):
    if isinstance(shape, tuple):
        shape = shape[-2:]
    elif isinstance(shape, torch.Tensor):
        shape = (int(shape[0]), int(shape[1]))
    else:
        raise NotImplementedError(f"shape type {type(shape)} not supported")
    return fold(seq.transpose(1, 2), shape, kernel_size=patch_size, stride=patch_size)


class PRXTransformer2DModel(nn.Module):
    def __init__(self, in_channels=16, patch_size=2, context_in_dim=2304, hidden_size=1792, mlp_ratio=3.5,
                 num_heads=28, depth=16, axes_dim=None, theta=10000, time_factor=1000.0, time_max_period=10000):
        super().__init__()
        if axes_dim is None:
            axes_dim = [32, 32]
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.out_channels = self.in_channels * self.patch_size ** 2
        self.time_factor = time_factor
        self.time_max_period = time_max_period
        pe_dim = hidden_size // num_heads
        if sum(axes_dim) != pe_dim:
            raise ValueError(f"Got {axes_dim} but expected positional dim {pe_dim}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.pe_embedder = PRXEmbedND(dim=pe_dim, theta=theta, axes_dim=axes_dim)
        self.img_in = nn.Linear(self.in_channels * self.patch_size ** 2, self.hidden_size, bias=True)
        self.time_in = MLPEmbedder(in_dim=256, hidden_dim=self.hidden_size)
        self.txt_in = nn.Linear(context_in_dim, self.hidden_size)
        self.blocks = nn.ModuleList([PRXBlock(self.hidden_size, self.num_heads, mlp_ratio=mlp_ratio)
                                     for _ in range(depth)])
        self.final_layer = FinalLayer(self.hidden_size, 1, self.out_channels)

    def _compute_timestep_embedding(self, timestep, dtype):
        return self.time_in(get_timestep_embedding(timesteps=timestep, embedding_dim=256,
                                                   max_period=self.time_max_period, scale=self.time_factor,
                                                   flip_sin_to_cos=True).to(dtype))

    def forward(self, hidden_states, timestep, encoder_hidden_states, attention_mask=None, attention_kwargs=None,
                return_dict=True):
        txt = self.txt_in(encoder_hidden_states)
        img = img2seq(hidden_states, self.patch_size)
        img = self.img_in(img)
        bs, _, h, w = hidden_states.shape
        img_ids = get_image_ids(bs, h, w, patch_size=self.patch_size, device=hidden_states.device)
        pe = self.pe_embedder(img_ids)
        vec = self._compute_timestep_embedding(timestep, dtype=img.dtype)
        for block in self.blocks:
            img = block(hidden_states=img, encoder_hidden_states=txt, temb=vec, image_rotary_emb=pe,
                        attention_mask=attention_mask)
        img = self.final_layer(img, vec)
        output = seq2img(img, self.patch_size, hidden_states.shape)
        return (output,)


def build():
    # capture_dit.py's prx case at --small sizes: 2 heads of 16 = RoPE axes (8, 8), one block.
    return PRXTransformer2DModel(in_channels=4, patch_size=2, context_in_dim=16, hidden_size=32, mlp_ratio=3.5,
                                 num_heads=2, depth=1, axes_dim=[8, 8], theta=10000, time_factor=1000.0,
                                 time_max_period=10000)


def inputs(g):
    # PRXPipeline: prompt embeds and their 0/1 mask (the last token padding), passed as attention_mask.
    n = 4
    mask = torch.ones(1, n, dtype=torch.int64)
    mask[:, n - 1:] = 0
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g), "attention_mask": mask,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).float() / 1000
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 attention_mask=c["attention_mask"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_prx.py@d33f10298fb5 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma float32 (PRXPipeline: t.float() / num_train_timesteps; the model scales by 1000)",
    velocity="model output as is (flow velocity), not negated",
    note="PRX (Photoroom) text-to-image DiT with an image-only residual stream, one block: the queries are the "
         "image rows only, keys/values are [text (txt_kv_proj of the once-projected caption, RMSNorm on k only), "
         "image (fused img_qkv_proj, per-head RMSNorm q/k)], so the text is never updated; bool key mask = "
         "[prompt mask, ones] expanded over heads/queries; 2-axis RoPE as 2x2 rotation matrices (cos, -sin, sin, "
         "cos; f64 freqs) from ids made of the image's shape, applied by broadcast multiply-add on image q/k; "
         "unfold/fold patchify and unpatchify; 6-way (shift, scale, gate) modulation from SiLU(t-embedding) over "
         "non-affine LayerNorms; bias-free GELU-tanh-gated MLP (gate*up -> down); cos-first sinusoid (shift 1) "
         "-> MLPEmbedder; final adaLN (shift, scale) + Linear")

if __name__ == "__main__":
    capture("prx", build, inputs, call, sys.argv[1], PRODUCER)
