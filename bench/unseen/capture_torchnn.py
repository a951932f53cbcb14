"""Capture torch.nn's own transformer layers as zflow traces (f32, CPU, random weights).

usage: /usr/bin/python3 capture_torchnn.py OUTDIR [CASE ...]

Cases: nn.TransformerEncoder over an nn.Embedding, two layers of nn.TransformerEncoderLayer
(d_model 32, 4 heads, feed-forward 48, GELU, dropout 0), fed sequence first [S, B, E]:
  torch_encoder_post  norm after each residual (norm_first=False, the default)
  torch_encoder_pre   norm before each sub-layer (norm_first=True)
  torch_encoder_batch batch first [B, S, E]: on torch >= 2.1 the capture turns torch's fused
                      fast path off and the layers' calls are recorded; on older torch the
                      fused path records each layer as one call (no sub-module boundary)
  torch_mha_cross     blocks calling nn.MultiheadAttention directly, batch first, need_weights at its
                      default: self-attention, then cross-attention to a context of another width
                      (kdim = vdim: q_proj_weight, k_proj_weight and v_proj_weight apart)
  torch_convzoo       a convolutional stack of torch.nn's other layers: GroupNorm, PReLU (one slope per
                      channel), InstanceNorm2d, Mish, PixelShuffle and PixelUnshuffle, ELU, a dilated Conv2d,
                      SELU, LeakyReLU(0.2), a bilinear Upsample, Softplus, a dilated Conv1d over the rows, and a
                      learnable affine block (a scalar scale and shift of its own: HGNetV2's), and timm's
                      ScaledStdConv2d (NFNets: a standardised weight times a gain and a constant), and a
                      ConvTranspose2d whose windows overlap (kernel 3, stride 2, output padding 1)
  torch_rnn           torch.nn's recurrent layers over an nn.Embedding, two sequences of 8: a two-layer
                      bidirectional LSTM (batch first), a GRU fed sequence first, an RNN of relu without
                      biases and one of tanh (both batch first), then a Linear
  torch_signalzoo     padding modes, resizes and 1-D and 3-D convolutions on a 12×12 image: a Conv2d padded by
                      reflection, a bicubic Upsample to 15×17, an AdaptiveAvgPool2d to 5×7 (windows that
                      overlap), a Conv2d padded circularly and one of stride 2 padded by replication; then the
                      map's cells as a sequence: a Conv1d padded by reflection, an overlapping ConvTranspose1d
                      (kernel 4, stride 2); then the sequence as frames [2, 5, 7]: a Conv3d of kernel 3
  torch_actzoo        torch.nn's other pointwise activations, each between two 1x1 Conv2d on an 8×8 image:
                      Hardtanh(−0.5, 0.7), ReLU6, CELU(0.5), Softshrink(0.3), Hardshrink(0.2), LogSigmoid,
                      Softsign, Tanhshrink, Hardswish, Hardsigmoid, GLU over the channels, Softmax2d
  timm_branches       timm's branch-joining blocks, rebuilt in plain torch as timm writes them (same module
                      tree, the same arithmetic in the same order; torch 1.13 here has no timm): two of
                      DPN's DualPathBlocks (timm/models/dpn.py: a projection split into a residual part and a
                      dense part, the dense path joined by channels), ResNeSt's SplitAttn with RadixSoftmax
                      (timm/layers/split_attn.py: radix 2, 2 cardinal groups), SK-ResNet's SelectiveKernel
                      (timm/layers/selective_kernel.py: paths dilated 1 and 2, a softmax across them; a second
                      one of stride 2, its dilated path strided too)
  torch_poolzoo       torch.nn's window layers on a 22×26 image: LPPool2d(2, 2), an AdaptiveMaxPool2d to 5×7 (windows
                      that do not divide), nn.Unfold (kernel 3, padding 1, stride 2) then a Linear over each patch,
                      nn.Fold back onto the map
  glm4v_tower         transformers' GLM-4V vision tower (modeling_glm4v.py) up to its merger, one block: a 12×12
                      learned position table resampled by grid_sample (bicubic, border) at each patch's (h, w)
                      of the 8×8 grid, the patches in 2×2 merge order
  groupvit_tower      transformers' GroupViT vision model (modeling_groupvit.py), two stages: self-attention over
                      [patches, 4 group tokens], the hard assignment of each patch to its most likely group
                      (a one-hot argmax straight through the softmax, each group's patches averaged over
                      count + 1), self-attention over the groups
  timm_mobileone      timm's MobileOne (byobnet.py's MobileOneBlock before re-parameterisation) in mobileone_s0's
                      layout at narrow widths on a 32×32 image: branch sums without norms between them, so the
                      activations pass 2^24, where every f32 value is whole
  svd_temporal_res    Stable Video Diffusion's SpatioTemporalResBlock (replicas/svd_unet.py) at 8 channels over 3
                      frames: a per-frame time embedding [B, F, C] permuted to [B, C, F, 1, 1] and added to a 5-D map
  unet_if_blocks      DeepFloyd IF's and Kandinsky's UNet pieces (diffusers resnet.py, attention_processor.py):
                      ResnetBlock2D downsampling (an average pool) and upsampling (nearest, in the forward) inside
                      the block, scale_shift, (x + h)/√2, and AttnAddedKVProcessor's attention
  unet_text_time      DeepFloyd IF's text-time embedding (diffusers embeddings.py: TextTimeEmbedding, AttentionPooling):
                      the rows' mean plus a learned [1, D] position as a class token, attention from it, a projection
  cascade_blocks      StableCascade's UNet pieces (diffusers unet_stable_cascade.py): channels LayerNorm, ResBlock with
                      GlobalResponseNorm, a TimestepBlock summing three mappers' chunks, an AttnBlock over the map's
                      rows joined with the mapped conditioning; the timestep-ratio embeddings given as an input
  timm_outlook        VOLO's outlook attention as timm writes it (timm/models/volo.py: OutlookAttention, Outlooker):
                      a patch convolution, then two outlookers of stride 2 and 1 over a [B, H, W, C] map
What they show: nn.MultiheadAttention, whose forward (F.multi_head_attention_forward) projects
q, k and v by one packed in_proj_weight [3E, E] it holds itself and the output by out_proj, a
sub-module it never calls. Weights are redrawn as weights.py does for the other captures.
"""
import math
import os
import sys
import types

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import randomize  # noqa: E402


class Encoder(nn.Module):
    def __init__(self, norm_first, batch_first):
        super().__init__()
        self.embed = nn.Embedding(64, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 48, dropout=0.0, activation="gelu",
                                           batch_first=batch_first, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.batch_first = batch_first

    def forward(self, ids):
        x = self.embed(ids)
        if self.batch_first:
            return self.encoder(x)
        return self.encoder(x.transpose(0, 1)).transpose(0, 1)


class CrossBlock(nn.Module):
    """A block as third-party DiT code writes it with nn.MultiheadAttention called directly (need_weights left
    at its default, so the call also returns the head-averaged weights): self-attention, batch first, then
    cross-attention to a context of another width (kdim = vdim = 24: separate q/k/v weights), then an MLP."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm2 = nn.LayerNorm(32)
        self.cross = nn.MultiheadAttention(32, 4, kdim=24, vdim=24, batch_first=True)
        self.norm3 = nn.LayerNorm(32)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))

    def forward(self, x, ctx):
        h = self.norm1(x)
        x = x + self.attn(h, h, h)[0]
        x = x + self.cross(self.norm2(x), ctx, ctx)[0]
        return x + self.mlp(self.norm3(x))


class Cross(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(64, 32)
        self.context = nn.Linear(16, 24)
        self.blocks = nn.ModuleList([CrossBlock() for _ in range(2)])

    def forward(self, ids, ctx):
        x, c = self.embed(ids), self.context(ctx)
        for b in self.blocks:
            x = b(x, c)
        return x


class ScalarAffine(nn.Module):
    """A scalar scale and shift of its own (timm HGNetV2's LearnableAffineBlock)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return self.scale * x + self.bias


class ScaledStdConv(nn.Conv2d):
    """timm's ScaledStdConv2d (NFNets): each filter standardised when called, times a learned gain and
    γ·fan_in^-½ (γ = 1.7881293296813965, timm's SiLU gain), by F.batch_norm of the weight."""

    def __init__(self, cin, cout, k, padding, gamma=1.7881293296813965, eps=1e-6):
        super().__init__(cin, cout, k, padding=padding)
        self.gain = nn.Parameter(torch.ones(cout, 1, 1, 1))
        self.scale = gamma * self.weight[0].numel() ** -0.5
        self.eps = eps

    def forward(self, x):
        weight = nn.functional.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                                          weight=(self.gain * self.scale).view(-1), training=True, momentum=0.,
                                          eps=self.eps).reshape_as(self.weight)
        return nn.functional.conv2d(x, weight, self.bias, self.stride, self.padding)


class ConvZoo(nn.Module):
    """torch.nn's convolutional layers and activations beyond the transformer's, on a 16×16 image."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.gn, self.prelu = nn.GroupNorm(2, 8), nn.PReLU(8)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.inorm, self.mish = nn.InstanceNorm2d(16, affine=True), nn.Mish()
        self.expand, self.shuffle, self.elu = nn.Conv2d(16, 32, 1), nn.PixelShuffle(2), nn.ELU()
        self.unshuffle, self.dilated, self.selu = nn.PixelUnshuffle(2), nn.Conv2d(32, 8, 3, padding=2, dilation=2), nn.SELU()
        self.leaky, self.affine = nn.LeakyReLU(0.2), ScalarAffine()
        self.up, self.proj, self.softplus = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), nn.Conv2d(8, 4, 1), nn.Softplus()
        self.rows = nn.Conv1d(4, 4, 3, padding=3, dilation=3)
        self.scaled = ScaledStdConv(4, 4, 3, padding=1)
        self.upconv = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        x = self.prelu(self.gn(self.stem(x)))
        x = self.mish(self.inorm(self.down(x)))
        x = self.elu(self.shuffle(self.expand(x)))
        x = self.affine(self.leaky(self.selu(self.dilated(self.unshuffle(x)))))
        x = self.upconv(self.scaled(self.softplus(self.proj(self.up(x)))))
        return self.rows(x.flatten(2))


class RNNZoo(nn.Module):
    """torch.nn's recurrent layers, each returning its output and its final states (read by nothing)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(64, 16)
        self.lstm = nn.LSTM(16, 12, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(24, 10)
        self.relu_rnn = nn.RNN(10, 8, nonlinearity="relu", bias=False, batch_first=True)
        self.tanh_rnn = nn.RNN(8, 8, batch_first=True)
        self.out = nn.Linear(8, 16)

    def forward(self, ids):
        x, _ = self.lstm(self.embed(ids))
        y, _ = self.gru(x.transpose(0, 1))
        x, _ = self.relu_rnn(y.transpose(0, 1))
        x, _ = self.tanh_rnn(x)
        return self.out(x)


class SignalZoo(nn.Module):
    """Convolutions padded in torch's other modes, resizes, and 1-D and 3-D convolutions."""

    def __init__(self):
        super().__init__()
        self.reflect = nn.Conv2d(3, 6, 3, padding=1, padding_mode="reflect")
        self.bicubic = nn.Upsample(size=(15, 17), mode="bicubic", align_corners=False)
        self.pool = nn.AdaptiveAvgPool2d((5, 7))
        self.circular = nn.Conv2d(6, 6, 3, padding=1, padding_mode="circular")
        self.replicate = nn.Conv2d(6, 4, 3, stride=2, padding=1, padding_mode="replicate")
        self.seq = nn.Conv1d(6, 6, 5, padding=2, padding_mode="reflect")
        self.up = nn.ConvTranspose1d(6, 4, 4, stride=2, padding=1)
        self.act = nn.LeakyReLU(0.1)
        self.video = nn.Conv3d(4, 4, 3, padding=1)

    def forward(self, x):
        x = self.circular(self.pool(self.bicubic(self.reflect(x))))
        y = self.replicate(x)
        x = self.act(self.up(self.seq(x.flatten(2))))
        return self.video(x.reshape(x.shape[0], 4, 2, 5, 7)), y


class ActZoo(nn.Module):
    """torch.nn's pointwise activations beyond the transformer's, each after a 1x1 convolution."""

    def __init__(self):
        super().__init__()
        acts = [nn.Hardtanh(-0.5, 0.7), nn.ReLU6(), nn.CELU(0.5), nn.Softshrink(0.3), nn.Hardshrink(0.2), nn.LogSigmoid(),
                nn.Softsign(), nn.Tanhshrink(), nn.Hardswish(), nn.Hardsigmoid(), nn.GLU(dim=1), nn.Softmax2d()]
        self.convs = nn.ModuleList([nn.Conv2d(3 if i == 0 else 4, 8 if isinstance(a, nn.GLU) else 4, 1) for i, a in enumerate(acts)])
        self.acts = nn.ModuleList(acts)

    def forward(self, x):
        for conv, act in zip(self.convs, self.acts):
            x = act(conv(x))
        return x


class BnAct(nn.Module):
    """timm's BatchNormAct2d reduced to its eval arithmetic: batch norm, then ReLU."""

    def __init__(self, c):
        super().__init__()
        self.bn, self.act = nn.BatchNorm2d(c), nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(x))


class BnActConv2d(nn.Module):
    def __init__(self, cin, cout, k=1, stride=1, groups=1):
        super().__init__()
        self.bn = BnAct(cin)
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False)

    def forward(self, x):
        return self.conv(self.bn(x))


class DualPathBlock(nn.Module):
    """timm's DualPathBlock (b=True): a residual path and a dense path that grows by inc channels."""

    def __init__(self, cin, r, inc, c, proj, stride=1):
        super().__init__()
        self.c = c
        self.c1x1_w = BnActConv2d(cin, c + 2 * inc, stride=stride) if proj else None
        self.c1x1_a = BnActConv2d(cin, r)
        self.c3x3_b = BnActConv2d(r, r, 3, stride=stride, groups=4)
        self.c1x1_c = BnAct(r)
        self.c1x1_c1 = nn.Conv2d(r, c, 1, bias=False)
        self.c1x1_c2 = nn.Conv2d(r, inc, 1, bias=False)

    def forward(self, x):
        x_in = torch.cat(x, dim=1) if isinstance(x, tuple) else x
        if self.c1x1_w is None:
            x_s1, x_s2 = x[0], x[1]
        else:
            x_s = self.c1x1_w(x_in)
            x_s1, x_s2 = x_s[:, :self.c, :, :], x_s[:, self.c:, :, :]
        x_in = self.c1x1_c(self.c3x3_b(self.c1x1_a(x_in)))
        out1, out2 = self.c1x1_c1(x_in), self.c1x1_c2(x_in)
        return x_s1 + out1, torch.cat([x_s2, out2], dim=1)


class RadixSoftmax(nn.Module):
    def __init__(self, radix, cardinality):
        super().__init__()
        self.radix, self.cardinality = radix, cardinality

    def forward(self, x):
        batch = x.size(0)
        x = x.view(batch, self.cardinality, self.radix, -1).transpose(1, 2)
        return nn.functional.softmax(x, dim=1).reshape(batch, -1)


class SplitAttn(nn.Module):
    """timm's SplitAttn (ResNeSt)."""

    def __init__(self, cin, cout, radix=2, groups=2, rd=8):
        super().__init__()
        self.radix = radix
        mid = cout * radix
        self.conv = nn.Conv2d(cin, mid, 3, padding=1, groups=groups * radix, bias=False)
        self.bn0, self.act0 = nn.BatchNorm2d(mid), nn.ReLU()
        self.fc1 = nn.Conv2d(cout, rd, 1, groups=groups)
        self.bn1, self.act1 = nn.BatchNorm2d(rd), nn.ReLU()
        self.fc2 = nn.Conv2d(rd, mid, 1, groups=groups)
        self.rsoftmax = RadixSoftmax(radix, groups)

    def forward(self, x):
        x = self.act0(self.bn0(self.conv(x)))
        B, RC, H, W = x.shape
        x = x.reshape((B, self.radix, RC // self.radix, H, W))
        x_gap = x.sum(dim=1).mean((2, 3), keepdim=True)
        x_gap = self.act1(self.bn1(self.fc1(x_gap)))
        x_attn = self.rsoftmax(self.fc2(x_gap)).view(B, -1, 1, 1)
        out = (x * x_attn.reshape((B, self.radix, RC // self.radix, 1, 1))).sum(dim=1)
        return out.contiguous()


class SelectiveKernelAttn(nn.Module):
    def __init__(self, c, paths=2, rd=8):
        super().__init__()
        self.paths = paths
        self.fc_reduce = nn.Conv2d(c, rd, 1, bias=False)
        self.bn, self.act = nn.BatchNorm2d(rd), nn.ReLU()
        self.fc_select = nn.Conv2d(rd, c * paths, 1, bias=False)

    def forward(self, x):
        x = self.act(self.bn(self.fc_reduce(x.sum(1).mean((2, 3), keepdim=True))))
        x = self.fc_select(x)
        B, C, H, W = x.shape
        return torch.softmax(x.view(B, self.paths, C // self.paths, H, W), dim=1)


class SelectiveKernel(nn.Module):
    """timm's SelectiveKernel: 3x3 paths dilated 1 and 2, stacked, weighed by a softmax across them."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.paths = nn.ModuleList([nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=d, dilation=d, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
                                    for d in (1, 2)])
        self.attn = SelectiveKernelAttn(cout)

    def forward(self, x):
        x = torch.stack([op(x) for op in self.paths], dim=1)
        return torch.sum(x * self.attn(x), dim=1)


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.dpn1 = DualPathBlock(16, 16, 8, 16, True)
        self.dpn2 = DualPathBlock(16 + 24, 16, 8, 16, False)
        self.mix = nn.Conv2d(16 + 32, 16, 1)
        self.split = SplitAttn(16, 8)
        self.sk = SelectiveKernel(8, 8)
        self.sk_down = SelectiveKernel(8, 8, stride=2)

    def forward(self, x):
        x = self.mix(torch.cat(self.dpn2(self.dpn1(self.stem(x))), dim=1))
        return self.sk_down(self.sk(self.split(x)))


class PoolZoo(nn.Module):
    """torch.nn's window layers not read before: LPPool2d, AdaptiveMaxPool2d to sizes that do not divide,
    nn.Unfold then a Linear over each patch (T2T-ViT's soft split), nn.Fold back to the map."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.lp = nn.LPPool2d(2, 2)
        self.amax = nn.AdaptiveMaxPool2d((5, 7))
        self.mix = nn.Conv2d(6, 4, 1)
        self.unfold = nn.Unfold(3, padding=1, stride=2)
        self.proj = nn.Linear(4 * 9, 4 * 9)
        self.fold = nn.Fold((5, 7), 3, padding=1, stride=2)
        self.out = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        x = self.mix(self.amax(self.lp(self.conv(x))))      # [B, 4, 5, 7]
        t = self.proj(self.unfold(x).transpose(1, 2))        # [B, 12 patches, 36]
        return self.out(self.fold(t.transpose(1, 2))), t


class OutlookAttention(nn.Module):
    """timm's OutlookAttention (timm/models/volo.py): each position's k×k neighbourhood of values
    weighted by a softmax the pooled map predicts, folded back over the overlaps."""

    def __init__(self, dim, heads, k=3, pad=1, stride=2):
        super().__init__()
        self.heads, self.k, self.pad, self.stride = heads, k, pad, stride
        self.scale = (dim // heads) ** -0.5
        self.v = nn.Linear(dim, dim, bias=False)
        self.attn = nn.Linear(dim, k ** 4 * heads)
        self.proj = nn.Linear(dim, dim)
        self.unfold = nn.Unfold(kernel_size=k, padding=pad, stride=stride)
        self.pool = nn.AvgPool2d(kernel_size=stride, stride=stride, ceil_mode=True)

    def forward(self, x):
        B, H, W, C = x.shape
        v = self.v(x).permute(0, 3, 1, 2)
        h, w = math.ceil(H / self.stride), math.ceil(W / self.stride)
        v = self.unfold(v).reshape(B, self.heads, C // self.heads, self.k * self.k, h * w).permute(0, 1, 4, 3, 2)
        attn = self.pool(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        attn = self.attn(attn).reshape(B, h * w, self.heads, self.k * self.k, self.k * self.k).permute(0, 2, 1, 3, 4)
        attn = attn * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).permute(0, 1, 4, 3, 2).reshape(B, C * self.k * self.k, h * w)
        x = nn.functional.fold(x, output_size=(H, W), kernel_size=self.k, padding=self.pad, stride=self.stride)
        return self.proj(x.permute(0, 2, 3, 1))


class Outlooker(nn.Module):
    """timm's Outlooker block: pre-norm outlook attention and MLP residuals over [B, H, W, C]."""

    def __init__(self, dim, heads, stride):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = OutlookAttention(dim, heads, stride=stride)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 3 * dim), nn.GELU(), nn.Linear(3 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Outlook(nn.Module):
    """VOLO's first stage: a patch convolution, then outlookers of stride 2 and 1 over the map."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 2, stride=2)
        self.blocks = nn.ModuleList([Outlooker(16, 2, 2), Outlooker(16, 2, 1)])
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        x = self.patch(x).permute(0, 2, 3, 1)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Glm4vRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class Glm4vPatchEmbed(nn.Module):
    def __init__(self, dim, patch=4, temporal=2):
        super().__init__()
        self.patch, self.temporal, self.dim = patch, temporal, dim
        self.proj = nn.Conv3d(3, dim, (temporal, patch, patch), stride=(temporal, patch, patch))

    def forward(self, x):
        x = x.view(-1, 3, self.temporal, self.patch, self.patch)
        return self.proj(x.to(dtype=self.proj.weight.dtype)).view(-1, self.dim)


class Glm4vRotary(nn.Module):
    """The vision rotary module: angles of positions 0..max for half the head's pairs, read at (h, w)."""

    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), persistent=False)

    def forward(self, x, pos_ids):
        seq = torch.arange(int(pos_ids.max()) + 1, dtype=self.inv_freq.dtype)
        freqs = torch.outer(seq, self.inv_freq)[pos_ids].flatten(1)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class Glm4vEmbeddings(nn.Module):
    """transformers' Glm4vVisionEmbeddings: the learned g×g position table resampled at each patch's
    (h, w) by grid_sample (bicubic, border), in f32, cast to the table's dtype, added."""

    def __init__(self, dim, grid):
        super().__init__()
        self.position_embedding = nn.Embedding(grid * grid, dim)

    def forward(self, embeddings, lengths, image_shapes, h_coords, w_coords):
        pos_embed_weight = self.position_embedding.weight
        hidden_size = pos_embed_weight.shape[1]
        orig_size = int(pos_embed_weight.shape[0] ** 0.5)
        pos_embed_2d = pos_embed_weight.view(orig_size, orig_size, hidden_size).permute(2, 0, 1).unsqueeze(0).to(dtype=torch.float32)
        target_h = torch.cat([image_shapes[i, 1].repeat(lengths[i]) for i in range(len(lengths))]).to(dtype=torch.float32)
        target_w = torch.cat([image_shapes[i, 2].repeat(lengths[i]) for i in range(len(lengths))]).to(dtype=torch.float32)
        h_coords = h_coords.to(dtype=torch.float32)
        w_coords = w_coords.to(dtype=torch.float32)
        norm_w = ((w_coords + 0.5) / target_w) * 2 - 1
        norm_h = ((h_coords + 0.5) / target_h) * 2 - 1
        grid = torch.stack((norm_w, norm_h), dim=-1).unsqueeze(0).unsqueeze(2)
        interpolated = nn.functional.grid_sample(pos_embed_2d, grid, mode="bicubic", align_corners=False, padding_mode="border")
        adapted = interpolated.squeeze(0).squeeze(-1).permute(1, 0).to(pos_embed_weight.dtype)
        return embeddings + adapted


def glm4v_rotate(q, k, cos, sin):
    def half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)
    cos, sin = cos.unsqueeze(-2).float(), sin.unsqueeze(-2).float()
    q, k = q.float(), k.float()
    return q * cos + half(q) * sin, k * cos + half(k) * sin


class Glm4vAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scaling = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cu_seqlens, position_embeddings):
        n = x.shape[0]
        q, k, v = self.qkv(x).reshape(n, 3, self.heads, -1).permute(1, 0, 2, 3).unbind(0)
        q, k = glm4v_rotate(q, k, *position_embeddings)
        q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        w = nn.functional.softmax(torch.matmul(q, k.transpose(2, 3)) * self.scaling, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.proj(torch.matmul(w, v).transpose(1, 2).reshape(n, -1))


class Glm4vMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Glm4vBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm2 = Glm4vRMSNorm(dim), Glm4vRMSNorm(dim)
        self.attn = Glm4vAttention(dim, heads)
        self.mlp = Glm4vMlp(dim, 2 * dim)

    def forward(self, x, cu_seqlens, position_embeddings):
        x = x + self.attn(self.norm1(x), cu_seqlens=cu_seqlens, position_embeddings=position_embeddings)
        return x + self.mlp(self.norm2(x))


class Glm4vTower(nn.Module):
    """transformers' GLM-4V vision tower up to its merger (modeling_glm4v.py), one block: patches in merge
    order (2×2 blocks of the grid), their (h, w) read by the rotary module and the position table."""

    def __init__(self, dim=32, heads=2, table=12, merge=2):
        super().__init__()
        self.merge = merge
        self.patch_embed = Glm4vPatchEmbed(dim)
        self.post_conv_layernorm = Glm4vRMSNorm(dim)
        self.rotary_pos_emb = Glm4vRotary(dim // heads // 2)
        self.embeddings = Glm4vEmbeddings(dim, table)
        self.blocks = nn.ModuleList([Glm4vBlock(dim, heads)])
        self.post_layernorm = Glm4vRMSNorm(dim)

    def pos_ids(self, grid_thw):
        out = []
        for t, h, w in grid_thw.tolist():
            m = self.merge
            hp = torch.arange(h).unsqueeze(1).expand(-1, w).reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
            wp = torch.arange(w).unsqueeze(0).expand(h, -1).reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
            out.append(torch.stack([hp, wp], dim=-1).repeat(t, 1))
        return torch.cat(out, dim=0)

    def forward(self, pixel_values, grid_thw):
        x = self.post_conv_layernorm(self.patch_embed(pixel_values))
        pos_ids = self.pos_ids(grid_thw)
        cos, sin = self.rotary_pos_emb(x, pos_ids)
        cu = torch.repeat_interleave(grid_thw[:, 1] * grid_thw[:, 2], grid_thw[:, 0]).cumsum(0, dtype=torch.int32)
        cu = nn.functional.pad(cu, (1, 0), value=0)
        seqlens = cu[1:] - cu[:-1]
        x = self.embeddings(x, seqlens, grid_thw, pos_ids[:, 0], pos_ids[:, 1])
        for blk in self.blocks:
            x = blk(x, cu_seqlens=cu, position_embeddings=(cos, sin))
        return self.post_layernorm(x)


class GvMLP(nn.Module):
    def __init__(self, dim, hidden, out=None):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, out or dim)
        self.activation_fn = nn.GELU()

    def forward(self, x):
        return self.fc2(self.activation_fn(self.fc1(x)))


class GvMixerMLP(GvMLP):
    def forward(self, x):
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class GvAttention(nn.Module):
    """GroupViTAttention: CLIP's attention, q scaled before the product; self or cross."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim, self.scale = heads, dim // heads, (dim // heads) ** -0.5
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = (nn.Linear(dim, dim) for _ in range(4))

    def _shape(self, t, n, b):
        return t.view(b, n, self.heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, encoder_hidden_states=None):
        b, n, d = hidden_states.size()
        src = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        q = self._shape(self.q_proj(hidden_states) * self.scale, n, b).view(b * self.heads, -1, self.head_dim)
        k = self._shape(self.k_proj(src), -1, b).view(b * self.heads, -1, self.head_dim)
        v = self._shape(self.v_proj(src), -1, b).view(b * self.heads, -1, self.head_dim)
        w = nn.functional.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
        o = torch.bmm(w, v).view(b, self.heads, n, self.head_dim).transpose(1, 2).reshape(b, n, d)
        return self.out_proj(o), None


class GvEncoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.self_attn = GvAttention(dim, heads)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = GvMLP(dim, 2 * dim)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))[0]
        return x + self.mlp(self.layer_norm2(x))


class GvCrossLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = GvAttention(dim, heads)
        self.norm2, self.norm_post = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = GvMLP(dim, 2 * dim)

    def forward(self, query, key):
        x = query + self.attn(query, encoder_hidden_states=key)[0]
        x = x + self.mlp(self.norm2(x))
        return self.norm_post(x)


def gv_hard_softmax(logits, dim):
    y_soft = logits.softmax(dim)
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = torch.zeros_like(logits, memory_format=torch.legacy_contiguous_format).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


class GvAssignAttention(nn.Module):
    """GroupViTAssignAttention in eval: each image token assigned to its most likely group (a one-hot
    argmax over the groups, straight through the softmax), each group's tokens averaged over count + ε."""

    def __init__(self, dim, eps=1.0):
        super().__init__()
        self.scale = dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.proj = (nn.Linear(dim, dim) for _ in range(4))
        self.assign_eps = eps

    def forward(self, query, key):
        value = key
        query, key, value = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        raw_attn = (query @ key.transpose(-2, -1)) * self.scale
        attn = gv_hard_softmax(raw_attn, dim=-2)
        soft_attn = nn.functional.softmax(raw_attn, dim=-2)
        attn = attn / (attn.sum(dim=-1, keepdim=True) + self.assign_eps)
        return self.proj(attn @ value), soft_attn


class GvTokenAssign(nn.Module):
    def __init__(self, dim, heads, groups, out_groups):
        super().__init__()
        self.norm_tokens, self.norm_post_tokens, self.norm_x, self.norm_new_x = (nn.LayerNorm(dim) for _ in range(4))
        self.mlp_inter = GvMixerMLP(groups, dim // 2, out_groups)
        self.pre_assign_attn = GvCrossLayer(dim, heads)
        self.assign = GvAssignAttention(dim)
        self.mlp_channels = GvMLP(dim, 4 * dim, dim)

    def forward(self, image_tokens, group_tokens):
        group_tokens = self.norm_tokens(group_tokens)
        image_tokens = self.norm_x(image_tokens)
        projected = self.norm_post_tokens(self.mlp_inter(group_tokens))
        projected = self.pre_assign_attn(projected, image_tokens)
        new_image_tokens, attention = self.assign(projected, image_tokens)
        new_image_tokens += projected
        return new_image_tokens + self.mlp_channels(self.norm_new_x(new_image_tokens)), attention


class GvStage(nn.Module):
    def __init__(self, dim, heads, groups, out_groups):
        super().__init__()
        self.groups = groups
        self.group_token = nn.Parameter(torch.zeros(1, groups, dim)) if groups else None
        self.layers = nn.ModuleList([GvEncoderLayer(dim, heads)])
        self.downsample = GvTokenAssign(dim, heads, groups, out_groups) if groups else None

    def forward(self, x):
        if self.group_token is not None:
            x = torch.cat([x, self.group_token.expand(x.size(0), -1, -1)], dim=1)
        for layer in self.layers:
            x = layer(x)
        if self.downsample is None:
            return x
        x, g = x[:, : -self.groups], x[:, -self.groups:]
        return self.downsample(x, g)[0]


class GroupViTTower(nn.Module):
    """transformers' GroupViT vision model (modeling_groupvit.py), two stages: patches (a Conv2d, a LayerNorm,
    a learned position table), a stage of self-attention over [patches, 4 group tokens] and the hard token
    assignment to 4 groups, a stage of self-attention over the groups, a final LayerNorm."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.projection = nn.Conv2d(3, dim, 4, stride=4)
        self.layernorm = nn.LayerNorm(dim)
        self.position_embeddings = nn.Parameter(torch.zeros(1, 16, dim))
        self.stages = nn.ModuleList([GvStage(dim, heads, 4, 4), GvStage(dim, heads, 0, 0)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, pixel_values):
        x = self.layernorm(self.projection(pixel_values).flatten(2).transpose(1, 2)) + self.position_embeddings
        for st in self.stages:
            x = st(x)
        return self.norm(x)


class OneConvBn(nn.Module):
    def __init__(self, cin, cout, k, stride, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class MobileOneBlock(nn.Module):
    """timm's MobileOneBlock (timm/models/byobnet.py) before re-parameterisation: a batch-norm skip branch,
    a 1x1 scale branch beside kernels larger than one, and four conv-BN branches, summed in place."""

    def __init__(self, cin, cout, k, stride, depthwise, branches=4):
        super().__init__()
        groups = cin if depthwise else 1
        self.identity = nn.BatchNorm2d(cout) if cin == cout and stride == 1 else None
        self.conv_kxk = nn.ModuleList([OneConvBn(cin, cout, k, stride, groups) for _ in range(branches)])
        self.conv_scale = OneConvBn(cin, cout, 1, stride, groups) if k > 1 else None
        self.attn, self.drop_path, self.act = nn.Identity(), nn.Identity(), nn.ReLU(inplace=True)

    def forward(self, x):
        identity_out = 0
        if self.identity is not None:
            identity_out = self.identity(x)
        scale_out = 0
        if self.conv_scale is not None:
            scale_out = self.conv_scale(x)
        out = scale_out + identity_out
        for ck in self.conv_kxk:
            out += ck(x)
        return self.act(self.attn(self.drop_path(out)))


class MobileOne(nn.Module):
    """timm's mobileone_s0 layout (stages of 2, 8, 10 and 1 depthwise-then-pointwise pairs) at narrow widths:
    no norm between the branch sums, so the activations grow by about 7.5 in variance per pair and pass 2^24,
    where every f32 value is a whole number."""

    def __init__(self, widths=(8, 8, 16, 16), depths=(2, 8, 10, 1)):
        super().__init__()
        self.stem = MobileOneBlock(3, 8, 3, 2, False, 1)
        stages, cin = [], 8
        for w, d in zip(widths, depths):
            blocks = []
            for i in range(d):
                blocks += [MobileOneBlock(cin, cin, 3, 2 if i == 0 else 1, True), MobileOneBlock(cin, w, 1, 1, False)]
                cin = w
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)

    def forward(self, x):
        return self.stages(self.stem(x))


class TemporalResProbe(nn.Module):
    """SVD's SpatioTemporalResBlock (bench/unseen/replicas/svd_unet.py, diffusers' resnet.py) at 8 channels, GroupNorm
    of 4 groups (upstream's 32 need 32 channels): a ResnetBlock2D per frame, a TemporalResnetBlock whose per-frame
    time embedding [B, F, C] is permuted to [B, C, F] and broadcast over a 5-D map, an AlphaBlender."""

    def __init__(self):
        super().__init__()
        sys.path.insert(0, os.path.join(HERE, "replicas"))
        from svd_unet import SpatioTemporalResBlock
        self.conv_in = nn.Conv2d(3, 8, 3, padding=1)
        self.temb = nn.Linear(6, 32)
        self.block = SpatioTemporalResBlock(8, 8, 32, groups=4)
        self.frames = 3

    def forward(self, x, t):
        x = self.conv_in(x)
        emb = self.temb(t).repeat_interleave(self.frames, dim=0)
        ind = torch.zeros(x.shape[0] // self.frames, self.frames)
        return self.block(x, emb, image_only_indicator=ind)


class IfResnetBlock2D(nn.Module):
    """diffusers' ResnetBlock2D with down/up (avg pool or nearest inside), skip_time_act, output_scale_factor, scale_shift."""
    def __init__(s, cin, cout, temb, groups, down=False, up=False, scale=math.sqrt(2)):
        super().__init__()
        s.norm1 = nn.GroupNorm(groups, cin, eps=1e-5); s.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        s.time_emb_proj = nn.Linear(temb, 2 * cout); s.norm2 = nn.GroupNorm(groups, cout, eps=1e-5)
        s.dropout = nn.Dropout(0.0); s.conv2 = nn.Conv2d(cout, cout, 3, padding=1); s.nonlinearity = nn.SiLU()
        s.down, s.up, s.scale = down, up, scale
        if down: s.downsample = nn.AvgPool2d(2, 2)
        s.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None
    def forward(s, input_tensor, temb):
        h = s.nonlinearity(s.norm1(input_tensor))
        if s.up:
            input_tensor = nn.functional.interpolate(input_tensor, scale_factor=2.0, mode="nearest"); h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        elif s.down:
            input_tensor = s.downsample(input_tensor); h = s.downsample(h)
        h = s.conv1(h)
        temb = s.time_emb_proj(temb)[:, :, None, None]   # skip_time_act: no SiLU on temb
        sc, sh = torch.chunk(temb, 2, dim=1)
        h = s.norm2(h); h = h * (1 + sc) + sh
        h = s.conv2(s.dropout(s.nonlinearity(h)))
        if s.conv_shortcut is not None: input_tensor = s.conv_shortcut(input_tensor.contiguous())
        return (input_tensor + h) / s.scale

class AddedKVAttention(nn.Module):
    """Attention with AttnAddedKVProcessor: the text's keys and values (add_k_proj, add_v_proj) joined before the map's."""
    def __init__(s, dim, heads, cross, groups):
        super().__init__()
        s.heads = heads; s.group_norm = nn.GroupNorm(groups, dim, eps=1e-5)
        s.to_q = nn.Linear(dim, dim); s.to_k = nn.Linear(dim, dim); s.to_v = nn.Linear(dim, dim)
        s.add_k_proj = nn.Linear(cross, dim); s.add_v_proj = nn.Linear(cross, dim)
        s.to_out = nn.ModuleList([nn.Linear(dim, dim), nn.Dropout(0.0)])
    def hb(s, x):
        b, n, d = x.shape; return x.reshape(b, n, s.heads, d // s.heads).permute(0, 2, 1, 3)
    def forward(s, hidden_states, encoder_hidden_states):
        residual = hidden_states
        hidden_states = hidden_states.view(hidden_states.shape[0], hidden_states.shape[1], -1).transpose(1, 2)
        b, n, _ = hidden_states.shape
        hidden_states = s.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        q = s.hb(s.to_q(hidden_states))
        ek = s.hb(s.add_k_proj(encoder_hidden_states)); ev = s.hb(s.add_v_proj(encoder_hidden_states))
        k = torch.cat([ek, s.hb(s.to_k(hidden_states))], dim=2); v = torch.cat([ev, s.hb(s.to_v(hidden_states))], dim=2)
        h = (torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]), dim=-1) @ v).transpose(1, 2).reshape(b, -1, residual.shape[1])
        h = s.to_out[1](s.to_out[0](h))
        return h.transpose(-1, -2).reshape(residual.shape) + residual

class IfBlocks(nn.Module):
    """DeepFloyd IF's and Kandinsky's UNet pieces (diffusers resnet.py, attention_processor.py): resnets downsampling
    by an average pool or upsampling by nearest inside the block, scale_shift without SiLU on temb, (x + h)/√2; an
    attention joining the text's keys and values (add_k_proj, add_v_proj) before the map's."""

    def __init__(s):
        super().__init__()
        s.conv_in = nn.Conv2d(3, 16, 3, padding=1); s.temb = nn.Linear(8, 64)
        s.r1 = IfResnetBlock2D(16, 16, 64, 4); s.rd = IfResnetBlock2D(16, 16, 64, 4, down=True)
        s.attn = AddedKVAttention(16, 2, 12, 4); s.ru = IfResnetBlock2D(16, 16, 64, 4, up=True); s.conv_out = nn.Conv2d(16, 3, 3, padding=1)
    def forward(s, x, t, ctx):
        e = s.temb(t); h = s.r1(s.conv_in(x), e); h = s.rd(h, e); h = s.attn(h, ctx); h = s.ru(h, e)
        return s.conv_out(h)


class TextTimeProbe(nn.Module):
    """IF's TextTimeEmbedding (replicas/if_unet.py's class, as diffusers' embeddings.py writes it) and a linear."""

    def __init__(self):
        super().__init__()
        sys.path.insert(0, os.path.join(HERE, "replicas"))
        from if_unet import TextTimeEmbedding
        self.add_embedding = TextTimeEmbedding(16, 32, num_heads=2)
        self.out = nn.Linear(32, 8)

    def forward(self, ctx):
        return self.out(self.add_embedding(ctx))


class CascadeBlocks(nn.Module):
    """StableCascade's UNet pieces (diffusers unets/unet_stable_cascade.py): a channels LayerNorm over a map, a
    ResBlock (depthwise conv, GELU, GlobalResponseNorm over the cells), a TimestepBlock modulating the map by the sum
    of three mappers' chunks (r, sca, crp), an AttnBlock whose keys are the map's rows joined with the mapped
    conditioning; PixelUnshuffle in and PixelShuffle out. The timestep-ratio embeddings come in as an input (the
    model makes them in its forward)."""

    def __init__(s):
        super().__init__()
        sys.path.insert(0, os.path.join(HERE, "replicas"))
        from stable_cascade import SDCascadeAttnBlock, SDCascadeLayerNorm, SDCascadeResBlock, SDCascadeTimestepBlock
        s.embedding = nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(12, 16, 1), SDCascadeLayerNorm(16, elementwise_affine=False, eps=1e-6))
        s.res = SDCascadeResBlock(16); s.tblock = SDCascadeTimestepBlock(16, 8, conds=("sca", "crp")); s.attn = SDCascadeAttnBlock(16, 12, 2)
        s.clf = nn.Sequential(SDCascadeLayerNorm(16, elementwise_affine=False, eps=1e-6), nn.Conv2d(16, 12, 1), nn.PixelShuffle(2))
    def forward(s, x, r, clip):
        h = s.embedding(x); h = s.res(h); h = s.tblock(h, r); h = s.attn(h, clip)
        return s.clf(h)
def cascade_r_embed(r, dim=8):
    """StableCascade's timestep-ratio sinusoid (replicas/stable_cascade.py, as the UNet makes it) of width dim."""
    sys.path.insert(0, os.path.join(HERE, "replicas"))
    from stable_cascade import StableCascadeUNet
    return StableCascadeUNet.get_timestep_ratio_embedding(types.SimpleNamespace(timestep_ratio_embedding_dim=dim), r)


CASES = {"torch_encoder_post": (False, False), "torch_encoder_pre": (True, False), "torch_encoder_batch": (False, True),
         "torch_mha_cross": None, "torch_convzoo": "conv", "torch_rnn": "rnn", "torch_signalzoo": "signal", "timm_branches": "branches", "torch_actzoo": "acts",
         "torch_poolzoo": "pools", "timm_outlook": "outlook",
         "glm4v_tower": "glm4v", "groupvit_tower": "groupvit", "timm_mobileone": "mobileone",
         "svd_temporal_res": "temporal", "unet_if_blocks": "ifblocks",
         "unet_text_time": "texttime",
         "cascade_blocks": "cascade"}


def capture(case, outdir):
    torch.manual_seed(0)
    kind = CASES[case]
    model = Cross() if kind is None else ConvZoo() if kind == "conv" else RNNZoo() if kind == "rnn" else SignalZoo() if kind == "signal" else Branches() if kind == "branches" else PoolZoo() if kind == "pools" else Outlook() if kind == "outlook" else Glm4vTower() if kind == "glm4v" else GroupViTTower() if kind == "groupvit" else MobileOne() if kind == "mobileone" else TemporalResProbe() if kind == "temporal" else IfBlocks() if kind == "ifblocks" else TextTimeProbe() if kind == "texttime" else CascadeBlocks() if kind == "cascade" else ActZoo() if kind == "acts" else Encoder(*kind)
    randomize(model, torch.Generator().manual_seed(1))
    model.eval()
    ids = torch.randint(0, 64, (2 if kind == "rnn" else 1, 8), generator=torch.Generator().manual_seed(2))
    path = os.path.join(outdir, f"{case}-f32.npz")
    prod = {"case": case, "library": f"torch.nn {torch.__version__}", "model_type": case}
    with zflow_capture.Capture(model, name="text_encoder", path=path, producer=prod) as cap:
        if kind == "cascade":
            g = torch.Generator().manual_seed(2)
            ids, clip = torch.randn(1, 3, 8, 8, generator=g), torch.randn(1, 4, 12, generator=g)
            ratio = torch.tensor([0.6])
            r = torch.cat([cascade_r_embed(ratio), cascade_r_embed(torch.zeros_like(ratio)), cascade_r_embed(torch.zeros_like(ratio))], dim=1)
            cap.input("pixel_values", ids)
            cap.input("r_embed", r)
            cap.input("clip", clip)
            args = (ids, r, clip)
        elif kind == "texttime":
            ids = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(2))
            cap.input("context", ids)
            args = (ids,)
        elif kind == "ifblocks":
            g = torch.Generator().manual_seed(2)
            ids, t, ctx = torch.randn(1, 3, 8, 8, generator=g), torch.randn(1, 8, generator=g), torch.randn(1, 5, 12, generator=g)
            cap.input("pixel_values", ids)
            cap.input("temb", t)
            cap.input("context", ctx)
            args = (ids, t, ctx)
        elif kind == "temporal":
            ids = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(2))
            t = torch.randn(1, 6, generator=torch.Generator().manual_seed(3))
            cap.input("pixel_values", ids)
            cap.input("temb", t)
            args = (ids, t)
        elif kind == "glm4v":
            grid = torch.tensor([[1, 8, 8]])
            ids = torch.randn(64, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(2))
            cap.input("pixel_values", ids)
            cap.input("grid_thw", grid)
            args = (ids, grid)
        elif kind in ("conv", "signal", "branches", "acts", "pools", "outlook", "groupvit", "mobileone"):
            ids = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(2))
            if kind == "signal":
                ids = torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(2))
            if kind in ("branches", "acts"):
                ids = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(2))
            if kind == "pools":
                ids = torch.randn(2, 3, 22, 26, generator=torch.Generator().manual_seed(2))
            if kind == "mobileone":
                ids = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
            if kind == "groupvit":
                ids = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
            if kind == "outlook":
                ids = torch.randn(1, 3, 20, 24, generator=torch.Generator().manual_seed(2))
            cap.input("pixel_values", ids)
        else:
            cap.input("input_ids", ids)
        if kind not in ("glm4v", "temporal", "ifblocks", "texttime", "cascade"):
            args = (ids,)
        if kind is None:
            ctx = torch.randn(1, 5, 16, generator=torch.Generator().manual_seed(4))
            cap.input("context", ctx)
            args = (ids, ctx)
        with torch.no_grad():
            h = model(*args)
        if kind in ("signal", "pools"):
            h, side = h
            cap.output("side", side)
        cap.output("hidden", h)
    return f"{cap.summary['calls']} calls, {os.path.getsize(path)} bytes"


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for case in sys.argv[2:] or list(CASES):
        print(f"{case:20s} {capture(case, outdir)}", flush=True)


if __name__ == "__main__":
    main()
