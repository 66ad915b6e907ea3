"""How to compose K parents: the operator, its weights, the sampler and its grid.

Data only: it imports nothing of robocompose, so every layer above (the methods, the composed
policy, a verb's config) can import it without loading torch. What only the method knows (its
weight constraints, its default number of steps) is the method's: `methods.method_of(config)`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from robocompose.choices import check_choices, one_of

# the names of composition.samplers.SAMPLERS, which need torch: a config names and checks them
# without it (a test keeps both in step); the annealed MCMC's scores vanish at sigma = inf
SAMPLER_NAMES = ("euler", "heun", "ancestral", "mcmc")
FINITE_SIGMA_SAMPLERS = ("mcmc",)
# the selector's scores (composition.selector) that need no state across chunks; "contrast"
# also needs a weaker checkpoint of each parent (`selector_contrast`); "verifier" is learned,
# from the `verifier` file (a test keeps these in step with the selector's)
SELECTOR_SCORES = ("agreement", "denoising", "likelihood", "contrast", "verifier")
# the methods whose operator can make the selector's composed candidate (the searchable ones)
SELECTOR_COMPOSITIONS = ("convex", "weighted_sum")
# fields added after compositions' fingerprints and search records were first written, with
# the default that left them out
LATER_FIELDS: dict[str, Any] = {
    "n_action_steps": None,
    "selector_score": "agreement",
    "verifier": None,
    "verifier_std_weight": 0.0,
    "selector_composition": "convex",
    "selector_samples": 2,
    "selector_contrast": None,
    "selector_margin": 0.0,
}


@dataclass
class CompositionConfig:
    """How to compose: the method's name (`operator`, see `composition.methods`), weights (one
    per parent), sampler, steps, sigma grid. Checks each field on its own; the method checks
    the rest (`methods.method_of`)."""

    operator: str = "convex"
    weights: Sequence[float] = (0.5, 0.5)
    sampler: str = one_of(SAMPLER_NAMES, "euler")
    steps: int | None = None  # None: the method's default_steps
    # actions of each composed chunk executed before replanning; None: parent 0's trained value
    n_action_steps: int | None = None
    # "reference": the parent grid ComposedDenoiser.sigmas picks; "parent<i>": parent i's own
    # grid (e.g. "parent0"); "karras"
    grid: str = "reference"
    sigma_max: float = 80.0  # karras grid only
    sigma_min: float = 0.002  # karras grid only
    sigma_switch: float = 1.0  # schedule only: `weights` above this sigma, `low_weights` below
    low_weights: Sequence[float] | None = None  # schedule only: weights below sigma_switch
    # selector only: how it picks among the candidates; verifier: by a verifier trained on
    # chunk logs (`robocompose verifier`), read from `verifier`
    selector_score: str = one_of(SELECTOR_SCORES, "agreement")
    verifier: str | None = None  # selector_score=verifier only: the verifier file
    # selector_score=verifier only: rank by the ensemble's mean minus this many standard
    # deviations of its members (0: the mean; > 0: a lower confidence bound)
    verifier_std_weight: float = 0.0
    # selector only: the method whose operator, at `weights`, makes its composed candidate
    # (a search's winner: convex weights, or the product of experts / a sharpened parent)
    selector_composition: str = one_of(SELECTOR_COMPOSITIONS, "convex")
    # selector only: native samples of each parent at every chunk (its candidates: this many per
    # parent, plus the composed one; more give a verifier more to choose from, at their cost)
    selector_samples: int = 2
    # selector only: the composed candidate runs unless another candidate's score is more than
    # this above its own (0: the best score runs). In the score's units: for the verifier a
    # probability of success, so 0.1 switches only for a chunk it rates 10 points better
    selector_margin: float = 0.0
    # selector_score=contrast only: a weaker checkpoint of each parent, in the parents' order
    # (e.g. an early training checkpoint), whose samples a candidate should stay away from
    selector_contrast: Sequence[str] | None = None
    sampler_kwargs: dict[str, Any] = field(default_factory=dict)
    # Parents on their own threads. Off by default: for every shipped pair at batch 1, one
    # thread running the parents in turn was as fast or faster (sub-millisecond forwards fight
    # over the GIL); threads tie or win slightly only at batch 16. Figures: P2 in
    # benchmarks/results/composition.json.
    parallel: bool = False
    allow_normalizer_mismatch: bool = False
    # backbones run in stacked form, one network per group of parents of one backbone config,
    # any family (composition/fused.py): the same actions to float rounding, faster
    fuse: bool = True

    def __post_init__(self) -> None:
        self.weights = [float(w) for w in self.weights]
        if not all(math.isfinite(w) for w in self.weights):
            raise ValueError(f"`weights` must be finite numbers. Got {self.weights}.")
        if self.low_weights is not None:
            self.low_weights = [float(w) for w in self.low_weights]
            if not all(math.isfinite(w) for w in self.low_weights):
                raise ValueError(f"`low_weights` must be finite numbers. Got {self.low_weights}.")
        if len(self.weights) < 2:  # every composition has >= 2 parents
            raise ValueError(
                "`weights` must have one entry per parent: 2 parents need 2 weights (e.g. "
                f"0.6,0.4). Got {len(self.weights)}: {self.weights}."
            )
        check_choices(self)
        if not re.fullmatch(r"reference|karras|parent\d+", self.grid):
            raise ValueError(
                "`grid` must be 'reference', 'karras' or 'parent<i>' (parent i's own grid, "
                f"e.g. 'parent0'). Got {self.grid!r}."
            )
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"`steps` must be >= 1 or None. Got {self.steps}.")
        if self.n_action_steps is not None and self.n_action_steps < 1:
            raise ValueError(f"`n_action_steps` must be >= 1 or None. Got {self.n_action_steps}.")
        if self.selector_contrast is not None:
            self.selector_contrast = [str(p) for p in self.selector_contrast]
        if self.selector_samples < 1:
            raise ValueError(f"`selector_samples` must be >= 1. Got {self.selector_samples}.")
        if not self.selector_margin >= 0:  # NaN fails too; inf: always the composed one
            raise ValueError(f"`selector_margin` must be >= 0. Got {self.selector_margin}.")
        if not (math.isfinite(self.verifier_std_weight) and self.verifier_std_weight >= 0):
            raise ValueError(
                f"`verifier_std_weight` must be a finite number >= 0. Got "
                f"{self.verifier_std_weight}."
            )

    def check_parent_count(self, parents: int) -> None:
        """Refuse weights that are not one per parent, naming both counts."""
        if len(self.weights) != parents:
            raise ValueError(
                f"`weights` must have one entry per parent: {parents} parents need {parents} "
                f"weights. Got {len(self.weights)}: {self.weights}."
            )

    def as_record(self) -> dict[str, Any]:
        """The fields as fingerprints and search records hold them: a field added since those
        were first written is left out at its default, so they still match."""
        return {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if not (k in LATER_FIELDS and v == LATER_FIELDS[k])
        }

    def grid_parent(self) -> int | None:
        """The parent whose own grid `grid` names ("parent<i>" -> i), else None."""
        return int(self.grid.removeprefix("parent")) if self.grid.startswith("parent") else None
