"""K same-architecture MLP parents evaluated as one network with stacked weights.

Two MLP parents cost twice one at batch 1: a forward is a few dozen sub-millisecond ops, so
threads only fight over the GIL and `torch.func.vmap` adds its own overhead. With the K weight
sets stacked, every Linear becomes one batched matmul (`baddbmm`) over (K, B, .). Each parent
keeps its own Denoiser adapter around the shared call (`NetworkDenoiser.net_input` before it,
`from_net_output` after), so a diffusion and a flow MLP fuse as well as two flows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from robocompose.policies.base import GenerativePolicy
from robocompose.policies.networks import MlpDenoiserNet


def fusable(parents: Sequence[GenerativePolicy]) -> bool:
    """MLP backbones of one config (so one horizon, action and conditioning size), any family."""
    first = parents[0]
    return all(
        isinstance(p.net, MlpDenoiserNet) and p.net.config == first.net.config for p in parents
    )


class _StackedLinear(nn.Module):
    def __init__(self, layers: Sequence[nn.Linear]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.stack([layer.weight.detach().t() for layer in layers]))
        biases = torch.stack([layer.bias.detach() for layer in layers])
        self.bias = nn.Parameter(biases.unsqueeze(1))

    def forward(self, x: Tensor) -> Tensor:
        """(K, B, in) -> (K, B, out)."""
        return torch.baddbmm(self.bias, x, self.weight)


class _StackedLayerNorm(nn.Module):
    def __init__(self, norms: Sequence[nn.LayerNorm]) -> None:
        super().__init__()
        self.eps = norms[0].eps
        self.weight = nn.Parameter(torch.stack([n.weight.detach() for n in norms]).unsqueeze(1))
        self.bias = nn.Parameter(torch.stack([n.bias.detach() for n in norms]).unsqueeze(1))

    def forward(self, x: Tensor) -> Tensor:
        normed = F.layer_norm(x, x.shape[-1:], eps=self.eps)
        return torch.addcmul(self.bias, normed, self.weight)


class StackedMlpDenoiser(nn.Module):
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
        self.norms = nn.ModuleList(
            _StackedLayerNorm([n.blocks[i].norm for n in nets]) for i in range(len(first.blocks))
        )
        self.fc1 = nn.ModuleList(
            _StackedLinear([n.blocks[i].fc1 for n in nets]) for i in range(len(first.blocks))
        )
        self.fc2 = nn.ModuleList(
            _StackedLinear([n.blocks[i].fc2 for n in nets]) for i in range(len(first.blocks))
        )
        self.out_norm = _StackedLayerNorm([n.out[0] for n in nets])
        self.out_proj = _StackedLinear([n.out[1] for n in nets])

    def forward(self, x: Tensor, timestep: Tensor, conds: Tensor) -> Tensor:
        """x (K, B, H, A), timestep (K, B), conds (K, B, C) -> (K, B, H, A): parent k's
        network on x[k], timestep[k], conds[k]."""
        k, b = timestep.shape
        t = self.time_embed(timestep.flatten()).to(conds.dtype).view(k, b, -1)
        c = self.cond_out(F.mish(self.cond_in(torch.cat([t, conds], -1))))
        params = self.film(F.mish(c)).split([2 * w for w in self.widths], dim=-1)
        h = self.in_proj(x.flatten(2))
        for norm, fc1, fc2, p in zip(self.norms, self.fc1, self.fc2, params, strict=True):
            scale, bias = p.chunk(2, dim=-1)
            h = h + fc2(F.mish(torch.addcmul(bias, fc1(norm(h)), scale)))
        out = self.out_proj(self.out_norm(h))
        return out.view(x.shape)
