# Writes torch113_f32.txt: f32 layer-norm vectors from PyTorch 1.13's CPU
# kernel (Debian's torch 1.13.1: /usr/bin/python3 torch113_f32.py >
# torch113_f32.txt). Each "LN N affine" opens a case of 3 rows of N: x, then
# g and b when affine, then y, as f32 bit patterns.
import torch
def bits(t): return [int(v) for v in t.contiguous().view(torch.int32).flatten().tolist()]
def h(l): return ", ".join("0x%08x" % (v & 0xffffffff) for v in l)
print("// torch", torch.__version__)
# rows of N=16 (two vectors), 20 (a vector and a tail of 4), 32, 600 (chunks, cascade)
for N, affine in [(16, True), (20, False), (32, False), (600, True)]:
    g = torch.Generator().manual_seed(N)
    xs = torch.randn(3, N, generator=g)*1.7 + 0.3
    ln = torch.nn.LayerNorm(N, eps=1e-5, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            ln.weight.copy_(1 + 0.2*torch.randn(N, generator=g))
            ln.bias.copy_(0.1*torch.randn(N, generator=g))
    y = ln(xs)
    print("LN", N, affine)
    print(" x:", h(bits(xs)))
    if affine:
        print(" g:", h(bits(ln.weight.data)))
        print(" b:", h(bits(ln.bias.data)))
    print(" y:", h(bits(y.detach())))
