"""How to compose K parents: the operator, its weights, the sampler and its grid.

Kept apart from the composed policy, which needs torch, so that a verb's config names and checks
a composition without loading torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robocompose.composition.operators import Operator

SUPERDIFF = {"superdiff_and": "and", "superdiff_or": "or"}
# SuperDiff integrates the reverse SDE by Euler-Maruyama, whose noise per step is too large on a
# coarse grid: at 10 steps PickPlace's 99% flow composed with itself by OR succeeds 0-5% of the
# time, at 40 steps 100% (20 episodes each).
DEFAULT_STEPS, SUPERDIFF_STEPS = 10, 40
# the names of composition.operators.OPERATORS and composition.samplers.SAMPLERS, which need
# torch: a config names and checks them without it (a test keeps both lists in step)
OPERATOR_NAMES = ("convex", "weighted_sum", "guided", "schedule")
SAMPLER_NAMES = ("euler", "heun", "ancestral", "mcmc")
POLICY_OPERATORS = (*OPERATOR_NAMES, "mixture", *SUPERDIFF)


@dataclass
class CompositionConfig:
    """How to compose: operator name, weights (one per parent), sampler, steps, sigma grid."""

    operator: str = "convex"
    weights: Sequence[float] = (0.5, 0.5)
    sampler: str = "euler"
    steps: int | None = None  # None: DEFAULT_STEPS, or SUPERDIFF_STEPS for SuperDiff
    grid: str = "reference"  # a parent's own grid (see ComposedDenoiser.sigmas), or "karras"
    sigma_max: float = 80.0  # karras grid only
    sigma_min: float = 0.002  # karras grid only
    sigma_switch: float = 1.0  # schedule only: `weights` above this sigma, `low_weights` below
    low_weights: Sequence[float] | None = None  # schedule only: weights below sigma_switch
    sampler_kwargs: dict[str, Any] = field(default_factory=dict)
    # Parents on their own threads. Off by default: on this 2-core CPU one thread running the
    # parents in turn was as fast or faster for every shipped pair at batch 1 (P2 in
    # benchmarks/results/composition.json: sub-millisecond forwards fight over the GIL);
    # threads tie or win slightly only at batch 16.
    parallel: bool = False
    allow_normalizer_mismatch: bool = False
    # MLP parents of one architecture (any family) run as one stacked network (composition/fused.py)
    fuse: bool = True

    def __post_init__(self) -> None:
        self.weights = [float(w) for w in self.weights]
        if not all(math.isfinite(w) for w in self.weights):
            raise ValueError(f"`weights` must be finite numbers. Got {self.weights}.")
        if self.low_weights is not None:
            self.low_weights = [float(w) for w in self.low_weights]
            if not all(math.isfinite(w) for w in self.low_weights):
                raise ValueError(f"`low_weights` must be finite numbers. Got {self.low_weights}.")
        if self.operator not in POLICY_OPERATORS:
            raise ValueError(
                f"`operator` must be one of {POLICY_OPERATORS}. Got {self.operator!r}."
            )
        if self.sampler not in SAMPLER_NAMES:
            raise ValueError(f"`sampler` must be one of {SAMPLER_NAMES}. Got {self.sampler!r}.")
        if self.grid not in ("reference", "karras"):
            raise ValueError(f"`grid` must be 'reference' or 'karras'. Got {self.grid!r}.")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"`steps` must be >= 1 or None. Got {self.steps}.")
        if self.operator == "schedule" and self.low_weights is None:
            raise ValueError("`low_weights` must be set for operator 'schedule'.")

    def denoising_steps(self) -> int:
        """`steps`, or the operator's default when unset (left unset in the config, so a
        config built for one operator and switched to another gets the new default)."""
        if self.steps is not None:
            return self.steps
        return SUPERDIFF_STEPS if self.operator in SUPERDIFF else DEFAULT_STEPS

    def make_operator(self) -> Operator:
        from robocompose.composition.operators import OPERATORS

        if self.operator in SUPERDIFF:  # parents are plumbed as a convex pair; weights per step
            return OPERATORS["convex"]([1.0 / len(self.weights)] * len(self.weights))
        if self.operator == "schedule":
            return OPERATORS["schedule"](self.weights, self.low_weights, self.sigma_switch)
        return OPERATORS[self.operator](self.weights)
