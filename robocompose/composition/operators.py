"""Operators: arithmetic on the parents' denoiser outputs at one (x, sigma).

Every operator here is linear in the parents' scores, so with coefficients c_i it reads

    eps_hat = sum_i c_i eps_i                  (score = -eps_hat / sigma)
    x0_hat  = (1 - sum_i c_i) x + sum_i c_i x0_i

which is D = x + sum_i c_i (D_i - x). When the c_i sum to 1 (convex, guided) the x term vanishes
and the combination is finite even at sigma = inf. Mixture (OR) and SuperDiff are not of this
form: they are methods of their own (`robocompose.composition.builtin_methods`).

| operator      | c_i(sigma)                                    | paper                        |
|---------------|-----------------------------------------------|------------------------------|
| convex        | w_i, w on the simplex                         | GPC (Eq. 7)                  |
| weighted_sum  | w_i >= 0, any sum (product of experts)        | sum of scores                |
| guided        | c_0 = 1 - sum_{i>0} w_i, c_i = w_i (i > 0)    | Composable Diffusion AND/NOT |
| schedule      | convex weights that switch at sigma_switch    | (ours)                       |
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from robocompose.policies.denoiser import DenoiserOutput

SIMPLEX_ATOL = 1e-6


class Operator(ABC):
    """Maps parent outputs at (x, sigma) to one output; `coefficients` says how."""

    name: str

    @abstractmethod
    def coefficients(self, sigma: float) -> list[float]: ...

    def active(self) -> list[bool]:
        """Which parents have a coefficient other than 0 at some noise level: the others add
        nothing, so the grid is chosen among these (at a vertex, the parent's own grid)."""
        return [abs(c) > SIMPLEX_ATOL for c in self.coefficients(1.0)]

    def combine(
        self, x: torch.Tensor, sigma: float, outputs: Sequence[DenoiserOutput]
    ) -> DenoiserOutput:
        c = self.coefficients(sigma)
        if len(c) != len(outputs):
            raise ValueError(f"{self.name}: {len(c)} weights for {len(outputs)} parents.")
        eps = sum(ci * out.eps_hat for ci, out in zip(c, outputs, strict=True))
        x0 = sum(ci * out.x0_hat for ci, out in zip(c, outputs, strict=True))
        rest = 1.0 - sum(c)
        if abs(rest) > SIMPLEX_ATOL:
            if math.isinf(sigma):
                raise ValueError(
                    f"{self.name}: weights summing to {sum(c):.3f} (not 1) need a finite "
                    "sigma_max; start the sampler's grid at a finite sigma."
                )
            x0 = x0 + rest * x
        return DenoiserOutput(x0, eps)


def _check_simplex(name: str, weights: Sequence[float]) -> None:
    if any(w < -SIMPLEX_ATOL for w in weights) or abs(sum(weights) - 1.0) > 1e-4:
        raise ValueError(
            f"`weights` of {name} must lie on the simplex (>= 0, sum 1). Got {list(weights)}."
        )


@dataclass
class Convex(Operator):
    """GPC: D = sum_i w_i D_i with w on the simplex."""

    weights: Sequence[float]
    name: str = "convex"

    def __post_init__(self) -> None:
        _check_simplex(self.name, self.weights)

    def coefficients(self, sigma: float) -> list[float]:
        return list(self.weights)


@dataclass
class WeightedSum(Operator):
    """Product of experts: D = x + sum_i w_i (D_i - x), i.e. a sum of scores; w_i >= 0."""

    weights: Sequence[float]
    name: str = "weighted_sum"

    def __post_init__(self) -> None:
        if any(w < 0 for w in self.weights):
            raise ValueError(f"`weights` of weighted_sum must be >= 0. Got {list(self.weights)}.")

    def coefficients(self, sigma: float) -> list[float]:
        return list(self.weights)


@dataclass
class Guided(Operator):
    """D = D_0 + sum_{i>0} w_i (D_i - D_0): parent 0 is the base; a negative w_i is NOT.

    `weights` has one entry per parent; the base's own entry is ignored (its coefficient is
    1 - sum of the others), so a weight vector can be shared with the other operators.
    """

    weights: Sequence[float]
    name: str = "guided"

    def coefficients(self, sigma: float) -> list[float]:
        others = list(self.weights[1:])
        return [1.0 - sum(others), *others]


@dataclass
class Schedule(Operator):
    """Convex weights that depend on the noise level: `high` above sigma_switch, `low` below.

    E.g. high=(1, 0), low=(0, 1): parent A shapes the coarse chunk, parent B the fine detail.
    """

    high: Sequence[float]
    low: Sequence[float]
    sigma_switch: float = 1.0
    name: str = "schedule"

    def __post_init__(self) -> None:
        _check_simplex(self.name, self.high)
        _check_simplex(self.name, self.low)
        if len(self.high) != len(self.low):
            raise ValueError(
                f"`high` and `low` must have one weight per parent. Got {len(self.high)} "
                f"and {len(self.low)}."
            )
        if not self.sigma_switch > 0:
            raise ValueError(f"`sigma_switch` must be > 0. Got {self.sigma_switch}.")

    def coefficients(self, sigma: float) -> list[float]:
        return list(self.high if sigma > self.sigma_switch else self.low)

    def active(self) -> list[bool]:
        return [
            abs(h) > SIMPLEX_ATOL or abs(lo) > SIMPLEX_ATOL
            for h, lo in zip(self.high, self.low, strict=True)
        ]
