"""Golden convolutions of torch 1.13 on the CPU in bf16 (testdata/torch113_conv_bf16.npz) for
TestConvStoredSums: each case's x, w, b and y as bf16 bit patterns (uint16), and its parameters
[stride, pad, groups]. Run with Debian's torch 1.13: /usr/bin/python3 torch113_conv_bf16.py"""
import numpy as np
import torch
import torch.nn.functional as F

assert torch.__version__.startswith("1.13"), torch.__version__
torch.manual_seed(113)
cases = {  # name: (cin, cout, k, stride, pad, groups, hw, bias)
    "k3": (16, 8, 3, 1, 1, 1, 6, True),
    "deep": (64, 4, 3, 1, 1, 1, 5, True),
    "strided": (16, 8, 3, 2, 1, 1, 8, False),
    "depthwise": (8, 8, 3, 1, 1, 8, 6, True),
    "grouped": (8, 8, 3, 1, 1, 2, 6, True),
    "patch": (4, 16, 2, 2, 0, 1, 8, True),
}
out = {}
bits = lambda t: t.contiguous().view(torch.int16).numpy().view(np.uint16)
for name, (cin, cout, k, stride, pad, groups, hw, bias) in cases.items():
    x = torch.randn(1, cin, hw, hw).bfloat16()
    w = (torch.randn(cout, cin // groups, k, k) / (cin // groups * k * k) ** 0.5).bfloat16()
    b = torch.randn(cout).bfloat16() if bias else None
    y = F.conv2d(x, w, b, stride=stride, padding=pad, groups=groups)
    out[name + "_x"], out[name + "_w"], out[name + "_y"] = bits(x), bits(w), bits(y)
    if b is not None:
        out[name + "_b"] = bits(b)
    out[name + "_p"] = np.array([stride, pad, groups], dtype=np.int64)
np.savez("torch113_conv_bf16.npz", **out)
