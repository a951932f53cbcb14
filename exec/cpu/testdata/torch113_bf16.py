# Writes torch113_bf16.txt: bf16 test vectors from PyTorch 1.13's CPU kernels
# (Debian's torch 1.13.1: /usr/bin/python3 torch113_bf16.py > torch113_bf16.txt).
# Each line "name: 0x...., ..." holds bf16 bit patterns; "LN N affine" opens a
# layer-norm case of 3 rows of N (x, then g and b when affine, then y).
import torch, math
torch.manual_seed(7)
def bits(t): return [int(v) for v in t.contiguous().view(torch.int16).flatten().tolist()]
def h(l): return ", ".join("0x%04x" % (v & 0xffff) for v in l)
x = (torch.randn(48)*3).bfloat16()
print("// torch", torch.__version__)
print("x:", h(bits(x)))
for name, f in [("silu", torch.nn.functional.silu), ("gelu_tanh", lambda t: torch.nn.functional.gelu(t, approximate='tanh')), ("gelu_erf", torch.nn.functional.gelu)]:
    print(name+":", h(bits(f(x))))
# layer norm: rows of N=32 (vector path), N=20 (tail: one vector + 4), N=600 (chunks, cascade depth 2)
for N, affine in [(32, False), (20, False), (600, False), (32, True)]:
    g = torch.Generator().manual_seed(N)
    xs = (torch.randn(3, N, generator=g)*1.7 + 0.3).bfloat16()
    ln = torch.nn.LayerNorm(N, eps=1e-6, elementwise_affine=affine).bfloat16()
    if affine:
        with torch.no_grad():
            ln.weight.copy_((1 + 0.2*torch.randn(N, generator=g)).bfloat16())
            ln.bias.copy_((0.1*torch.randn(N, generator=g)).bfloat16())
    y = ln(xs)
    print("LN", N, affine)
    print(" x:", h(bits(xs)))
    if affine:
        print(" g:", h(bits(ln.weight.data)))
        print(" b:", h(bits(ln.bias.data)))
    print(" y:", h(bits(y.detach())))
