"""Weights as the conformance traces have them: redrawn, and placed as
from_pretrained(torch_dtype=...) leaves them. Shared by capture_lm.py and capture_dit.py."""
import math

import torch


def randomize(model, gen):
    """Every weight redrawn so no factor hides behind a zero or a one."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                if name.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(1.0 + 0.4 * (torch.rand(p.shape, generator=gen) - 0.5))
            else:
                fan_in = math.prod(p.shape[1:])
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))


def place(model, dtype, device):
    """As from_pretrained(torch_dtype=dtype): floating parameters and persistent buffers cast. A parameter stays
    f32 where an entry of _keep_in_fp32_modules is a component of its full name (diffusers matches the loaded
    state dict's names, so an entry may name a parameter itself, as "scale_shift_table" does)."""
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or [])
    for mname, mod in model.named_modules():
        fp32 = dtype != torch.float32 and any(k in mname.split(".") for k in keep)
        for n, p in list(mod._parameters.items()):
            if p is not None and p.is_floating_point():
                own = fp32 or (dtype != torch.float32 and n in keep)
                p.data = p.data.to(torch.float32 if own else dtype)
        for n, b in list(mod._buffers.items()):
            if b is not None and b.is_floating_point() and n not in mod._non_persistent_buffers_set:
                mod._buffers[n] = b.to(dtype)
    return model.to(device)
