"""The capture loop of bench/unseen/capture_dit.py for the replicas in this folder (torch 1.13 on CPU, f32):
the same 3-step flow-matching Euler loop over SIGMAS, the same weight redraw, the same producer fields."""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import randomize  # noqa: E402

SIGMAS = [1.0, 0.75, 0.4, 0.0]


def get_timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1,
                           max_period=10000):
    """diffusers.models.embeddings.get_timestep_embedding, as the replicas' upstream files call it."""
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32)
    exponent = exponent / (half_dim - downscale_freq_shift)
    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
    if embedding_dim % 2 == 1:
        emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))
    return emb


def sdpa(q, k, v, mask=None, scale=None):
    """torch 2's F.scaled_dot_product_attention (math path) on [B, H, L, D]; torch 1.13 lacks it.
    mask: bool (True attends) or additive float."""
    scale = 1.0 / (q.shape[-1] ** 0.5) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, dim=-1) @ v


def capture(case, build, inputs, call, outdir, producer):
    torch.manual_seed(0)
    model = build()
    randomize(model, torch.Generator().manual_seed(1))
    model = model.eval()
    cond = inputs(torch.Generator().manual_seed(2))
    x = cond.pop("noise")
    path = os.path.join(outdir, f"{case}-f32.npz")
    prod = dict(producer, case=case, library="replica", placement="hf")
    with zflow_capture.Capture(model, name="transformer", path=path, producer=prod) as cap:
        for k, v in cond.items():
            cap.input(k, v)
        cap.input("noise", x)
        cap.input("sigmas", torch.tensor(SIGMAS, dtype=torch.float32))
        with torch.no_grad():
            for i in range(len(SIGMAS) - 1):
                with cap.step(i):
                    v = call(model, x, SIGMAS[i], cond)
                x = x + (SIGMAS[i + 1] - SIGMAS[i]) * v.to(x.dtype)
        cap.output("latents", x)
    print(f"{case}: {cap.summary['calls']} calls -> {path} ({os.path.getsize(path)} bytes)")
