"""Small models the tests capture."""

from dataclasses import dataclass

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Net(nn.Module):
    """Two blocks, one MLP called twice per forward (ordinals), a norm."""

    def __init__(self, d=4):
        super().__init__()
        self.blocks = nn.ModuleList([MLP(d), MLP(d)])
        self.shared = MLP(d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        x = self.shared(x)
        x = self.shared(x)
        return self.norm(x)


@dataclass
class Pair:
    first: torch.Tensor
    second: object


class Inner(nn.Module):
    """Takes keyword arguments of every kind; returns nested containers."""

    def __init__(self, d=4):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, *, rotary, options, scale=1.0, flag=True, name="a", nothing=None, dtype=None):
        y = self.proj(x) * scale
        return {"sample": y, "extras": (y + 1, Pair(y * 2, 7)), "flag": flag, "name": name}


class Outer(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.inner = Inner(d)

    def forward(self, x, rotary, return_dict=True):
        out = self.inner(x, rotary=rotary, options={"mode": "fast", "k": 3, "t": x[:1]},
                         scale=0.5, flag=False, name="n", nothing=None, dtype=torch.float32)
        return out if return_dict else (out["sample"], None)


class Identity(nn.Module):
    def forward(self, x):
        return x


class Clone(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Identity()

    def forward(self, x):
        return self.inner(x).clone()


class Boom(nn.Module):
    """Raises in its second child, after the first child's tensors were written."""

    def __init__(self, d=4):
        super().__init__()
        self.ok = nn.Linear(d, d)
        self.bad = nn.Linear(d, d)

    def forward(self, x):
        x = self.ok(x)
        if x.shape[-1] > 0:
            raise RuntimeError("boom")
        return self.bad(x)


class InPlace(nn.Module):
    """Modifies its children's outputs in place after they returned, as some real models do."""

    def __init__(self, d=4):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)

    def forward(self, x):
        y = self.a(x)
        z = self.b(x)
        y += z  # in place, after y was recorded as a.out
        z.mul_(0)
        return y
