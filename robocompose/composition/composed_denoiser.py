"""A composed Denoiser: K parents, one operator, one sigma grid.

Chunks are aligned by time: the reference parent (index 0, the longest horizon) defines the
composed chunk; parent i sees the window [start_i, start_i + H_i) of it. Positions every parent
covers are combined by the operator; the rest keep the reference parent's output ("tail from A").
At one noise level the parents' forward passes are independent: they run in turn, on a thread
pool (torch releases the GIL inside its kernels), or as one stacked network (`fused_net`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from robocompose.composition.fused import BoundStack
from robocompose.composition.operators import SIMPLEX_ATOL, Operator
from robocompose.composition.timing import ParentTimes
from robocompose.policies.denoiser import Denoiser, DenoiserOutput, NetworkDenoiser


@dataclass(frozen=True)
class ActionMap:
    """Reference normalised actions -> a parent's normalised actions: y = scale * x + offset."""

    scale: torch.Tensor  # (A,)
    offset: torch.Tensor  # (A,)


def karras_sigmas(steps: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> list[float]:
    """Karras et al. 2022 (Eq. 5) grid from sigma_max down to sigma_min, then 0."""
    ramp = np.linspace(0, 1, steps)
    lo, hi = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return [float(s) for s in (hi + ramp * (lo - hi)) ** rho] + [0.0]


@dataclass(frozen=True)
class _Fold:
    """A linear operator and affine adapters at one sigma, per stack: the inputs' scales
    (K_s, 1, 1, 1), the map from the stacked outputs to x0_hat and eps_hat (2, K_s); and the
    coefficients of x in each."""

    scales: list[torch.Tensor]
    to_outputs: list[torch.Tensor]
    x_x0: float
    x_eps: float
    steps: dict[float, list[torch.Tensor]] = field(default_factory=dict)  # see `euler_step`


class ComposedDenoiser(Denoiser):
    def __init__(
        self,
        parents: Sequence[Denoiser],
        operator: Operator,
        starts: Sequence[int] | None = None,
        action_maps: Sequence[ActionMap | None] | None = None,
        executor: ThreadPoolExecutor | None = None,
        stacks: Sequence[BoundStack] | None = None,
        times: ParentTimes | None = None,
        folds: dict[float, _Fold | None] | None = None,
    ) -> None:
        """`stacks`: the parents' networks as stacked ones, each for a group of parents (see
        `robocompose.composition.fused`; they run on `executor` when there are several); the
        parents, `NetworkDenoiser`s then, only scale their inputs and convert their outputs.
        `times`: where each parent's denoiser calls (or the fused network's) are timed.
        `folds`: where the folded operator is kept by sigma (it depends on neither the
        observation nor x, so a policy keeps it across chunks)."""
        if len(parents) < 2:
            raise ValueError(f"composition needs >= 2 parents. Got {len(parents)}.")
        dims = [p.action_dim for p in parents]
        if len(set(dims)) != 1:
            raise ValueError(f"parents must share one action dimension. Got {dims}.")
        self.parents = list(parents)
        self.operator = operator
        self.starts = list(starts) if starts is not None else [0] * len(parents)
        self.action_maps = list(action_maps) if action_maps is not None else [None] * len(parents)
        self.horizon, self.action_dim = parents[0].horizon, dims[0]
        for i, (p, s) in enumerate(zip(self.parents, self.starts, strict=True)):
            if s < 0 or s + p.horizon > self.horizon:
                raise ValueError(
                    f"parent {i}'s window [{s}, {s + p.horizon}) must lie inside the reference "
                    f"chunk [0, {self.horizon}); put the longest-horizon parent first."
                )
        ends = [s + p.horizon for s, p in zip(self.starts, parents, strict=True)]
        self.overlap = (max(self.starts), min(ends))
        self.sigma_max = max(p.sigma_max for p in parents)
        self.sigma_min = min(p.sigma_min for p in parents)
        self.executor = executor
        if stacks is not None and not all(isinstance(p, NetworkDenoiser) for p in parents):
            raise TypeError("stacked networks need parents that are NetworkDenoisers.")
        self.stacks = list(stacks) if stacks is not None else None
        # stacked parents, one window, one action space and a linear operator: the adapters
        # and the operator fold into a few ops on the stacked outputs (`_folded_call`)
        self._foldable = (
            self.stacks is not None
            and all(s == 0 for s in self.starts)
            and all(p.horizon == self.horizon for p in parents)
            and all(m is None for m in self.action_maps)
            and type(operator).combine is Operator.combine
        )
        self.times = times
        self._folds = folds if folds is not None else {}

    def sigmas(self, steps: int) -> list[float]:
        """Of the grids of the parents the operator weighs (coefficient not 0), the one
        starting highest that every such parent is sound on (the first such parent's on a tie),
        whatever order the parents come in. At a vertex of the simplex that is the one
        weighted parent's own grid: the composition there is that parent on its own sampler
        (Euler in sigma space is DDIM, and the flow's Euler), not the parent on another's grid.

        A flow's grid starts at sigma = inf, unusable for an epsilon DDPM (a Stack one
        composed on it fell from 24% to 0%); the DDPM's DDIM grid then, which starts near
        sigma 7. With a v-prediction DDPM the flow's grid wins: on the DDPM's grid the
        flow fell from 68% to 59.5% (Stack, 200 episodes), on the flow's the DDPM held."""
        active = [p for p, on in zip(self.parents, self.operator.active(), strict=True) if on]
        weighed = active or self.parents
        grids = [p.sigmas(steps) for p in weighed]
        sound_at_inf = all(p.sound_at_inf for p in weighed)
        usable = [g for g in grids if sound_at_inf or math.isfinite(g[0])] or grids[:1]
        return max(usable, key=lambda g: g[0])

    def prepare(self, sigmas: Sequence[float]) -> None:
        """Each parent, or each stacked network for its group, computes its conditioning at
        every level of the grid in one call."""
        for part in self.parents if self.stacks is None else self.stacks:
            part.prepare(sigmas)

    def _parent_x(self, i: int, x: torch.Tensor, sigma: float) -> torch.Tensor:
        """Parent i's window of x, in its own action space."""
        start, amap = self.starts[i], self.action_maps[i]
        x_i = x[:, start : start + self.parents[i].horizon]
        if amap is not None and not math.isinf(sigma):
            x_i = x_i * amap.scale + amap.offset
        return x_i

    def _to_reference(self, i: int, out: DenoiserOutput) -> DenoiserOutput:
        amap = self.action_maps[i]
        if amap is None:
            return out
        return DenoiserOutput((out.x0_hat - amap.offset) / amap.scale, out.eps_hat / amap.scale)

    def _parent_call(self, i: int, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        x_i = self._parent_x(i, x, sigma)
        with self.times.denoising(i) if self.times is not None else nullcontext():
            out = self.parents[i](x_i, sigma)
        return self._to_reference(i, out)

    def _stack_outputs(self, stack: BoundStack, x: torch.Tensor, sigma: float) -> list:
        """The outputs of a stacked group's parents, in the group's order."""
        parents, indices = stack.parents, stack.indices
        x_ins = [
            p.net_input(self._parent_x(i, x, sigma), sigma)[0]
            for i, p in zip(indices, parents, strict=True)
        ]
        timer = nullcontext()
        if self.times is not None:
            timer = self.times.denoising(indices[0]) if len(indices) == 1 else self.times.fused()
        with timer:
            outs = stack.outputs(x_ins, sigma)
        return [
            self._to_reference(i, p.from_net_output(x_in, sigma, out))
            for i, p, x_in, out in zip(indices, parents, x_ins, outs, strict=True)
        ]

    def _run(self, units: Sequence, call) -> list:
        """`call` on each unit (a parent index or a stack), the first on the calling thread and
        the rest on the executor when there is one: one hand-off fewer per step (the parents
        of a state policy take a fraction of a millisecond per call)."""
        if self.executor is None or len(units) == 1:
            return [call(u) for u in units]
        futures = [self.executor.submit(call, u) for u in units[1:]]
        first = call(units[0])
        return [first, *(f.result() for f in futures)]

    def parent_outputs(self, x: torch.Tensor, sigma: float) -> list[DenoiserOutput]:
        if self.stacks is None:
            return self._run(range(len(self.parents)), lambda i: self._parent_call(i, x, sigma))
        outputs: list[DenoiserOutput] = [None] * len(self.parents)  # type: ignore[list-item]
        per_stack = self._run(self.stacks, lambda s: self._stack_outputs(s, x, sigma))
        for stack, outs in zip(self.stacks, per_stack, strict=True):
            for i, out in zip(stack.indices, outs, strict=True):
                outputs[i] = out
        return outputs

    def combine(
        self, x: torch.Tensor, sigma: float, outputs: Sequence[DenoiserOutput]
    ) -> DenoiserOutput:
        lo, hi = self.overlap
        windows = [
            DenoiserOutput(o.x0_hat[:, lo - s : hi - s], o.eps_hat[:, lo - s : hi - s])
            for o, s in zip(outputs, self.starts, strict=True)
        ]
        mixed = self.operator.combine(x[:, lo:hi], sigma, windows)
        if (lo, hi) == (0, self.horizon):
            return mixed
        x0, eps = outputs[0].x0_hat.clone(), outputs[0].eps_hat.clone()
        x0[:, lo:hi], eps[:, lo:hi] = mixed.x0_hat, mixed.eps_hat
        return DenoiserOutput(x0, eps)

    def _fold(self, sigma: float) -> _Fold | None:
        """The operator and every parent's adapter at sigma as tensors for `_folded_call`:
        x0_hat = (sum c_k p_k a_k + 1 - sum c) x + sum c_k q_k out_k, eps_hat likewise. None
        where an adapter is not affine, or where `combine` must refuse (see there)."""
        assert self.stacks is not None
        c = self.operator.coefficients(sigma)
        rest = 1.0 - sum(c)
        folds = [p.affine(sigma) for p in self.parents]  # type: ignore[attr-defined]
        if any(f is None for f in folds) or (math.isinf(sigma) and abs(rest) > SIMPLEX_ATOL):
            return None
        like = self.stacks[0].conds
        scales, to_outputs = [], []
        for stack in self.stacks:
            k = stack.indices
            scales.append(torch.tensor([folds[i].a for i in k]).to(like).view(-1, 1, 1, 1))
            rows = [[c[i] * folds[i].q for i in k], [c[i] * folds[i].s for i in k]]
            to_outputs.append(torch.tensor(rows).to(like))  # (2, K_s): to x0_hat, to eps_hat
        x_x0 = sum(ci * f.p * f.a for ci, f in zip(c, folds, strict=True)) + rest
        x_eps = sum(ci * f.r * f.a for ci, f in zip(c, folds, strict=True))
        return _Fold(scales, to_outputs, x_x0, x_eps)

    def _folded(self, sigma: float) -> _Fold | None:
        if sigma not in self._folds:
            self._folds[sigma] = self._fold(sigma)
        return self._folds[sigma]

    def _stack_networks(self, x: torch.Tensor, sigma: float, fold: _Fold) -> list[torch.Tensor]:
        """Each stack's network outputs (K_s, B, H, A) on its parents' scaled inputs."""
        times = self.times

        def network(j: int) -> torch.Tensor:
            stack = self.stacks[j]  # type: ignore[index]
            timer = nullcontext()
            if times is not None:
                one = len(stack.indices) == 1
                timer = times.denoising(stack.indices[0]) if one else times.fused()
            with timer:
                return stack.outputs(x * fold.scales[j], sigma)

        return self._run(range(len(self.stacks)), network)  # type: ignore[arg-type]

    def _folded_call(self, x: torch.Tensor, sigma: float) -> DenoiserOutput | None:
        """The operator on the stacked parents' outputs with every adapter an `Affine`: the
        same arithmetic as adapters then `Operator.combine`, in one matmul per stack."""
        fold = self._folded(sigma)
        if fold is None:
            return None
        both = None  # rows: x0_hat, eps_hat, flattened
        for j, out in enumerate(self._stack_networks(x, sigma, fold)):
            part = torch.mm(fold.to_outputs[j], out.flatten(1))
            both = part if both is None else both.add_(part)
        assert both is not None
        x0, eps = both.view(2, *x.shape).unbind(0)
        return DenoiserOutput(x0.add(x, alpha=fold.x_x0), eps.add(x, alpha=fold.x_eps))

    def euler_step(self, x: torch.Tensor, sigma: float, sigma_next: float) -> torch.Tensor | None:
        """x' = x0_hat + sigma_next eps_hat with the fold's rows combined first: one matmul-add
        per stack on the network outputs instead of the operator's outputs and then the step
        (`sample_euler` takes it; a chunk at batch 1 spends as much on those small ops as on
        the networks of two MLP parents). None where the operator does not fold."""
        fold = self._folded(sigma) if self._foldable else None
        if fold is None:
            return None
        rows = fold.steps.get(sigma_next)
        if rows is None:  # each stack's outputs -> x' (1, K_s), kept by the next level
            rows = [(m[0] + sigma_next * m[1])[None] for m in fold.to_outputs]
            fold.steps[sigma_next] = rows
        flat = x.reshape(1, -1)
        a = fold.x_x0 + sigma_next * fold.x_eps
        for row, out in zip(rows, self._stack_networks(x, sigma, fold), strict=True):
            flat = torch.addmm(flat, row, out.flatten(1), beta=a)
            a = 1.0
        return flat.view(x.shape)

    def __call__(self, x: torch.Tensor, sigma: float) -> DenoiserOutput:
        if self._foldable:
            folded = self._folded_call(x, sigma)
            if folded is not None:
                return folded
        return self.combine(x, sigma, self.parent_outputs(x, sigma))
