"""The capture loop of bench/unseen/capture_dit.py for the replicas in this folder (torch 1.13 on CPU, f32):
the same 3-step flow-matching Euler loop over SIGMAS, the same weight redraw, the same producer fields.
REPLICA_DTYPE=bf16 writes <case>-bf16.npz instead: the model placed as from_pretrained(torch_dtype=bf16)
leaves it (weights.place), floating inputs in bf16 except RoPE tables (as pipelines build them), still on
the CPU so that each replica's call runs unchanged; the reference's own bf16-vs-f32 distance is then the
shared tool's limit for the pair. REPLICA_DEVICE=cuda (torch 2.x) runs the bf16 run on the GPU instead, as
diffusers' bf16 runs are made: the weights and the request drawn on the CPU as before, then moved, and
torch's default device set to the GPU so that tensors a replica's call makes land there too."""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import place, randomize  # noqa: E402

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


def _bf16(key, v):
    """A request input as a bf16 pipeline passes it: floating tensors in bf16, RoPE tables kept f32."""
    if not torch.is_tensor(v) or not v.is_floating_point() or "rotary" in key or "freqs" in key:
        return v
    return v.to(torch.bfloat16)


def _to(v, device):
    """A request input moved to device, lists and tuples of tensors too."""
    if torch.is_tensor(v):
        return v.to(device)
    if isinstance(v, (list, tuple)):
        return type(v)(_to(x, device) for x in v)
    return v


def capture(case, build, inputs, call, outdir, producer, prepare=None):
    """The 3-step flow loop: call(model, x, sigma, cond) at each step. prepare(model, cond), where given, runs once
    before the loop, outside any step, as a pipeline's work before its denoising loop does (a T2I adapter's
    features); it may add entries to cond for call to read."""
    torch.manual_seed(0)
    model = build()
    randomize(model, torch.Generator().manual_seed(1))
    model = model.eval()
    cond = inputs(torch.Generator().manual_seed(2))
    x = cond.pop("noise")
    tag = os.environ.get("REPLICA_DTYPE", "f32")
    device = os.environ.get("REPLICA_DEVICE", "cpu")
    if tag == "bf16":
        model = place(model, torch.bfloat16, device)
        cond = {k: _bf16(k, v) for k, v in cond.items()}
        x = x.to(torch.bfloat16)
    elif tag != "f32":
        raise SystemExit(f"REPLICA_DTYPE={tag}: f32 or bf16")
    if device != "cpu":
        if tag != "bf16":
            raise SystemExit("REPLICA_DEVICE: for the bf16 run only (the f32 reference runs on the CPU)")
        cond = {k: _to(v, device) for k, v in cond.items()}
        x = x.to(device)
        torch.set_default_device(device)
    path = os.path.join(outdir, f"{case}-{tag}.npz")
    prod = dict(producer, case=case, library="replica", placement="hf")
    with zflow_capture.Capture(model, name="transformer", path=path, producer=prod) as cap:
        for k, v in cond.items():
            cap.input(k, v)
        cap.input("noise", x)
        cap.input("sigmas", torch.tensor(SIGMAS, dtype=torch.float32, device=x.device))
        with torch.no_grad():
            if prepare is not None:
                prepare(model, cond)
            for i in range(len(SIGMAS) - 1):
                with cap.step(i):
                    v = call(model, x, SIGMAS[i], cond)
                x = x + (SIGMAS[i + 1] - SIGMAS[i]) * v.to(x.dtype)
        cap.output("latents", x)
    print(f"{case}: {cap.summary['calls']} calls -> {path} ({os.path.getsize(path)} bytes)")


def capture_once(case, build, inputs, outdir, producer, name="vae", output="sample"):
    """One forward of build()'s model on inputs(g) (a dict of named tensors, passed in order), captured as a
    trace with no sampling loop (an autoencoder's encode and decode): REPLICA_DTYPE and REPLICA_DEVICE as in
    capture."""
    torch.manual_seed(0)
    model = build()
    randomize(model, torch.Generator().manual_seed(1))
    model = model.eval()
    args = inputs(torch.Generator().manual_seed(2))
    tag = os.environ.get("REPLICA_DTYPE", "f32")
    device = os.environ.get("REPLICA_DEVICE", "cpu")
    if tag == "bf16":
        model = place(model, torch.bfloat16, device)
        args = {k: _to(_bf16(k, v), device) for k, v in args.items()}
        if device != "cpu":
            torch.set_default_device(device)
    elif tag != "f32" or device != "cpu":
        raise SystemExit(f"REPLICA_DTYPE={tag} REPLICA_DEVICE={device}: f32 on the CPU, or bf16")
    path = os.path.join(outdir, f"{case}-{tag}.npz")
    prod = dict(producer, case=case, library="replica", placement="hf")
    with zflow_capture.Capture(model, name=name, path=path, producer=prod) as cap:
        for k, v in args.items():
            cap.input(k, v)
        with torch.no_grad():
            out = model(*args.values())
        cap.output(output, out)
    print(f"{case}: {cap.summary['calls']} calls -> {path} ({os.path.getsize(path)} bytes)")
