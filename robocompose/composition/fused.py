"""K same-architecture parents evaluated as one network with stacked weights.

Two parents cost twice one at batch 1: a forward is dozens of sub-millisecond ops, so threads
only fight over the GIL and `torch.func.vmap` adds its own overhead. With the K weight sets
stacked, every op runs once for all K: an MLP's Linear becomes one batched matmul (`baddbmm`)
over (K, B, .); a UNet's convolutions become grouped ones over K * channels (GroupNorm with K
times the groups normalises each parent's channels alone). Each parent keeps its own Denoiser
adapter around the shared call (`NetworkDenoiser.net_input` before it, `from_net_output` after),
so a diffusion and a flow network fuse as well as two flows.

As in `BoundBackbone`, the conditioning (timestep embedding, conditioning MLP, FiLM) depends on
the timestep and the observation only, so a sampler that knows its grid gets it for every step
and every parent in one call (`BoundStack.prepare`).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from robocompose.policies.base import GenerativePolicy
from robocompose.policies.denoiser import (
    Denoiser,
    DenoiserOutput,
    NetworkDenoiser,
    evaluated_levels,
)
from robocompose.policies.networks import (
    ConditionalResidualBlock1D,
    ConditionalUnet1D,
    Conv1dBlock,
    MlpDenoiserNet,
    run_unet_blocks,
)

FUSABLE = (MlpDenoiserNet, ConditionalUnet1D)


def stack_groups(parents: Sequence[GenerativePolicy]) -> list[list[int]] | None:
    """The parents' indices grouped by backbone kind and config (one horizon, action and
    conditioning size; any family), in order of first appearance: each group runs as one
    stacked network, a group of one too (its stacked form is the faster one). None when some
    backbone has no stacked form."""
    if not all(isinstance(p.net, FUSABLE) for p in parents):
        return None
    groups: dict[str, list[int]] = {}
    for i, parent in enumerate(parents):
        key = json.dumps([type(parent.net).__name__, parent.net.config], default=str)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def fusable(parents: Sequence[GenerativePolicy]) -> bool:
    """Whether all the parents' backbones stack into one network."""
    groups = stack_groups(parents)
    return groups is not None and len(groups) == 1


class _StackedLinear(nn.Module):
    def __init__(self, layers: Sequence[nn.Linear]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.stack([layer.weight.detach().t() for layer in layers]))
        biases = torch.stack([layer.bias.detach() for layer in layers])
        self.bias = nn.Parameter(biases.unsqueeze(1))

    def forward(self, x: Tensor) -> Tensor:
        """(K, B, in) -> (K, B, out)."""
        return torch.baddbmm(self.bias, x, self.weight)


class _StackedNormLinear(_StackedLinear):
    """K LayerNorms each followed by a Linear, the norm's affine folded into the Linear
    (W (w * n + b) + c = (W diag(w)) n + (W b + c)): one op fewer per pair."""

    def __init__(self, norms: Sequence[nn.LayerNorm], layers: Sequence[nn.Linear]) -> None:
        super().__init__(layers)
        self.eps = norms[0].eps
        scale = torch.stack([n.weight.detach() for n in norms])  # (K, in)
        shift = torch.stack([n.bias.detach() for n in norms])
        with torch.no_grad():
            self.bias += torch.bmm(shift.unsqueeze(1), self.weight)
            self.weight *= scale.unsqueeze(-1)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(F.layer_norm(x, x.shape[-1:], eps=self.eps))


class StackedNetwork(nn.Module):
    """K backbones of one config as one module: x (K, B, H, A), timestep (K, B), conds (K, B, C)
    -> (K, B, H, A), parent k's network on x[k], timestep[k], conds[k]."""

    @abstractmethod
    def conditioning(self, timestep: Tensor, conds: Tensor) -> Tensor:
        """timestep (K, M), conds (K, M, C) -> (K, M, P): every parent's FiLM parameters."""

    @abstractmethod
    def forward_conditioned(self, x: Tensor, conditioning: Tensor) -> Tensor: ...

    def forward(self, x: Tensor, timestep: Tensor, conds: Tensor) -> Tensor:
        return self.forward_conditioned(x, self.conditioning(timestep, conds))


class StackedMlpDenoiser(StackedNetwork):
    """`MlpDenoiserNet.forward` for K networks of one config at once."""

    def __init__(self, nets: Sequence[MlpDenoiserNet]) -> None:
        super().__init__()
        first = nets[0]
        self.horizon, self.action_dim = first.horizon, first.action_dim
        self.widths = first.film.widths
        self.time_embed = first.time_embed  # parameter-free
        self.cond_in = _StackedLinear([n.cond_mlp[0] for n in nets])
        self.cond_out = _StackedLinear([n.cond_mlp[2] for n in nets])
        self.film = _StackedLinear([n.film.proj for n in nets])
        self.in_proj = _StackedLinear([n.in_proj for n in nets])
        self.fc1 = nn.ModuleList(  # each block's norm, then fc1
            _StackedNormLinear([n.blocks[i].norm for n in nets], [n.blocks[i].fc1 for n in nets])
            for i in range(len(first.blocks))
        )
        self.fc2 = nn.ModuleList(
            _StackedLinear([n.blocks[i].fc2 for n in nets]) for i in range(len(first.blocks))
        )
        self.out_proj = _StackedNormLinear([n.out[0] for n in nets], [n.out[1] for n in nets])

    def conditioning(self, timestep: Tensor, conds: Tensor) -> Tensor:
        k, m = timestep.shape
        t = self.time_embed(timestep.flatten()).to(conds.dtype).view(k, m, -1)
        c = self.cond_out(F.mish(self.cond_in(torch.cat([t, conds], -1))))
        return self.film(F.mish(c))

    def forward_conditioned(self, x: Tensor, conditioning: Tensor) -> Tensor:
        params = conditioning.split([2 * w for w in self.widths], dim=-1)
        h = self.in_proj(x.flatten(2))
        for fc1, fc2, p in zip(self.fc1, self.fc2, params, strict=True):
            scale, bias = p.chunk(2, dim=-1)
            h = h + fc2(F.mish(torch.addcmul(bias, fc1(h), scale)))
        return self.out_proj(h).view(x.shape)


class _StackedConv(nn.Module):
    """K Conv1d (or one kind of ConvTranspose1d) as one batched matmul on channels-last maps
    (K, B, L, C) -> (K, B, L', out): the windows are unfolded into rows, so the whole conv is
    one `baddbmm`; at these sizes torch's own conv costs several times that per call."""

    def __init__(self, convs: Sequence[nn.Conv1d]) -> None:
        super().__init__()
        first = convs[0]
        if first.groups != 1 or first.dilation != (1,):
            raise ValueError("only ungrouped, undilated convolutions stack.")
        (self.kernel,), (self.stride,), (self.padding,) = (
            first.kernel_size,
            first.stride,
            first.padding,
        )
        # (out, in, k) -> (in * k, out): the unfolded rows are ordered (channel, tap)
        self.weight = nn.Parameter(torch.stack([c.weight.detach().flatten(1).t() for c in convs]))
        self.bias = nn.Parameter(torch.stack([c.bias.detach() for c in convs]).unsqueeze(1))

    def forward(self, x: Tensor) -> Tensor:
        k, b, length, c = x.shape
        if self.kernel == 1 and self.stride == 1:
            rows = x.reshape(k, b * length, c)
        else:
            pad = (0, 0, self.padding, self.padding)
            windows = F.pad(x, pad).unfold(2, self.kernel, self.stride)  # (K, B, L', C, k)
            length = windows.shape[2]
            rows = windows.reshape(k, b * length, c * self.kernel)
        return torch.baddbmm(self.bias, rows, self.weight).view(k, b, length, -1)


class _StackedConvTranspose(nn.Module):
    """K ConvTranspose1d as one batched matmul, then overlap-add of the taps (`F.fold`)."""

    def __init__(self, convs: Sequence[nn.ConvTranspose1d]) -> None:
        super().__init__()
        first = convs[0]
        if first.groups != 1 or first.dilation != (1,) or first.output_padding != (0,):
            raise ValueError("only plain transposed convolutions stack.")
        (self.kernel,), (self.stride,), (self.padding,) = (
            first.kernel_size,
            first.stride,
            first.padding,
        )
        self.out_channels = first.out_channels
        # (in, out, k) -> (in, out * k): the columns F.fold expects, (channel, tap)
        self.weight = nn.Parameter(torch.stack([c.weight.detach().flatten(1) for c in convs]))
        self.bias = nn.Parameter(torch.stack([c.bias.detach() for c in convs])[:, None, None])

    def forward(self, x: Tensor) -> Tensor:
        k, b, length, c = x.shape
        taps = torch.bmm(x.reshape(k, b * length, c), self.weight)  # (K, B * L, out * k)
        full = (length - 1) * self.stride + self.kernel
        out = F.fold(
            taps.view(k * b, length, -1).transpose(1, 2),
            output_size=(1, full),
            kernel_size=(1, self.kernel),
            stride=(1, self.stride),
        )  # (K * B, out, 1, full)
        out = out[:, :, 0, self.padding : full - self.padding]
        return out.transpose(1, 2).unflatten(0, (k, b)) + self.bias


class _StackedGroupNorm(nn.Module):
    """K GroupNorms of one shape on channels-last maps (K, B, L, C)."""

    def __init__(self, norms: Sequence[nn.GroupNorm]) -> None:
        super().__init__()
        self.groups, self.eps = norms[0].num_groups, norms[0].eps
        self.weight = nn.Parameter(torch.stack([n.weight.detach() for n in norms])[:, None, None])
        self.bias = nn.Parameter(torch.stack([n.bias.detach() for n in norms])[:, None, None])

    def forward(self, x: Tensor) -> Tensor:
        k, b, length, c = x.shape
        normed = F.group_norm(
            x.reshape(k * b, length, c).transpose(1, 2), self.groups, eps=self.eps
        )
        return torch.addcmul(self.bias, normed.transpose(1, 2).view(k, b, length, c), self.weight)


class _StackedConvBlock(nn.Module):
    """K `Conv1dBlock`s: conv -> GroupNorm -> Mish."""

    def __init__(self, blocks: Sequence[Conv1dBlock]) -> None:
        super().__init__()
        self.conv = _StackedConv([b.conv for b in blocks])
        self.norm = _StackedGroupNorm([b.norm for b in blocks])

    def forward(self, x: Tensor) -> Tensor:
        return F.mish(self.norm(self.conv(x)))


class _StackedResidualBlock(nn.Module):
    """K `ConditionalResidualBlock1D`s; FiLM `scale` and `bias` are (K, B, 1, C)."""

    def __init__(self, blocks: Sequence[ConditionalResidualBlock1D]) -> None:
        super().__init__()
        self.block1 = _StackedConvBlock([b.block1 for b in blocks])
        self.block2 = _StackedConvBlock([b.block2 for b in blocks])
        same = isinstance(blocks[0].residual, nn.Identity)
        self.residual = None if same else _StackedConv([b.residual for b in blocks])

    def forward(self, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        h = torch.addcmul(bias, self.block1(x), scale)
        return self.block2(h) + (x if self.residual is None else self.residual(x))


class StackedUnet(StackedNetwork):
    """`ConditionalUnet1D.forward` for K networks of one config at once, on channels-last
    feature maps (K, B, L, C), where the chunk (K, B, H, A) already is one."""

    def __init__(self, nets: Sequence[ConditionalUnet1D]) -> None:
        super().__init__()
        first = nets[0]
        self.widths = first.film.widths
        self.time_embed = first.time_mlp[0]  # parameter-free
        self.time_in = _StackedLinear([n.time_mlp[1] for n in nets])
        self.time_out = _StackedLinear([n.time_mlp[3] for n in nets])
        self.film = _StackedLinear([n.film.proj for n in nets])

        def residual(get) -> _StackedResidualBlock:
            return _StackedResidualBlock([get(n) for n in nets])

        def resample(level: int) -> nn.Module:
            if isinstance(first.down[level][2], nn.Identity):
                return nn.Identity()
            return _StackedConv([n.down[level][2] for n in nets])

        self.down = nn.ModuleList(
            nn.ModuleList(
                [
                    residual(lambda n, i=level: n.down[i][0]),
                    residual(lambda n, i=level: n.down[i][1]),
                    resample(level),
                ]
            )
            for level in range(len(first.down))
        )
        self.mid = nn.ModuleList(residual(lambda n, i=i: n.mid[i]) for i in range(len(first.mid)))
        self.up = nn.ModuleList(
            nn.ModuleList(
                [
                    _StackedConvTranspose([n.up[level][0] for n in nets]),
                    residual(lambda n, i=level: n.up[i][1]),
                    residual(lambda n, i=level: n.up[i][2]),
                ]
            )
            for level in range(len(first.up))
        )
        self.final_block = _StackedConvBlock([n.final[0] for n in nets])
        self.final_conv = _StackedConv([n.final[1] for n in nets])

    def conditioning(self, timestep: Tensor, conds: Tensor) -> Tensor:
        k, m = timestep.shape
        t = self.time_embed(timestep.flatten()).to(conds.dtype).view(k, m, -1)
        t = self.time_out(F.mish(self.time_in(t)))
        return self.film(F.mish(torch.cat([t, conds], -1)))

    def forward_conditioned(self, x: Tensor, conditioning: Tensor) -> Tensor:
        parts = conditioning.unsqueeze(2).split([2 * w for w in self.widths], dim=-1)
        films = iter(p.chunk(2, dim=-1) for p in parts)  # (K, B, 1, w) each, block order
        h = run_unet_blocks(self, x, films, channel_dim=-1)
        return self.final_conv(self.final_block(h))


def stack_networks(nets: Sequence[nn.Module]) -> StackedNetwork:
    """The stacked form of K backbones that `fusable` accepts."""
    if all(isinstance(n, MlpDenoiserNet) for n in nets):
        return StackedMlpDenoiser(nets)  # type: ignore[arg-type]
    if all(isinstance(n, ConditionalUnet1D) for n in nets):
        return StackedUnet(nets)  # type: ignore[arg-type]
    raise TypeError(f"cannot stack backbones {[type(n).__name__ for n in nets]}.")


class BoundStack:
    """A stacked network with the K parents' observations `conds` (K, B, C) bound, between
    their Denoiser adapters: `outputs(x_ins, sigma)`, parent k's network on x_ins[k].
    `indices`: which parents of a composition they are (default 0..K-1)."""

    def __init__(
        self,
        net: StackedNetwork,
        parents: Sequence[NetworkDenoiser],
        conds: Tensor,
        indices: Sequence[int] | None = None,
        tables: dict[tuple[float, ...], Tensor] | None = None,
    ) -> None:
        """`tables`: where the parents' timestep tables are kept by grid (they depend on
        neither the observation nor x, so a policy keeps them across chunks)."""
        self.net, self.parents, self.conds = net, list(parents), conds
        self.indices = list(indices) if indices is not None else list(range(len(parents)))
        self.prepared: dict[float, Tensor] = {}
        self._tables = tables if tables is not None else {}

    def prepare(self, sigmas: Sequence[float]) -> None:
        """Every parent's conditioning at every level of the grid, in one call."""
        levels = evaluated_levels(sigmas)
        table = self._tables.get(tuple(levels))
        if table is None:
            timesteps = [[p.net_timestep(s) for s in levels] for p in self.parents]
            table = torch.tensor(timesteps, dtype=self.conds.dtype, device=self.conds.device)
            self._tables[tuple(levels)] = table
        b = self.conds.shape[1]
        stacked = self.net.conditioning(
            table.repeat_interleave(b, dim=1), self.conds.repeat(1, len(levels), 1)
        )  # (K, N * B, P), level-major rows
        per_level = stacked.unflatten(1, (len(levels), b)).unbind(1)
        self.prepared = dict(zip(levels, per_level, strict=True))

    def outputs(self, x_ins: Sequence[Tensor] | Tensor, sigma: float) -> Tensor:
        """(K, B, H, A): each parent's network output on its input (x_ins[k], or a stacked
        (K, B, H, A)) at level sigma."""
        x = x_ins if isinstance(x_ins, Tensor) else torch.stack(list(x_ins))
        conditioning = self.prepared.get(sigma)
        if conditioning is None:
            timesteps = [p.net_timestep(sigma) for p in self.parents]
            t = torch.tensor(timesteps, dtype=x.dtype, device=x.device)
            return self.net(x, t[:, None].expand(-1, x.shape[1]), self.conds)
        return self.net.forward_conditioned(x, conditioning)


class StackedDenoiser(Denoiser):
    """One policy's Denoiser with its backbone run in stacked form (K = 1): the code path of
    a fused composition for a single parent, so that a parent alone runs (and is timed) on
    the same footing as its fused composition."""

    def __init__(self, inner: NetworkDenoiser, net: StackedNetwork, cond: Tensor) -> None:
        self.inner = inner
        self.stack = BoundStack(net, [inner], cond[None])
        self.horizon, self.action_dim = inner.horizon, inner.action_dim
        self.sigma_max, self.sigma_min = inner.sigma_max, inner.sigma_min
        self.sound_at_inf = inner.sound_at_inf

    def sigmas(self, steps: int) -> list[float]:
        return self.inner.sigmas(steps)

    def prepare(self, sigmas: Sequence[float]) -> None:
        self.stack.prepare(sigmas)

    def __call__(self, x: Tensor, sigma: float) -> DenoiserOutput:
        x_in, _ = self.inner.net_input(x, sigma)
        return self.inner.from_net_output(x_in, sigma, self.stack.outputs([x_in], sigma)[0])
