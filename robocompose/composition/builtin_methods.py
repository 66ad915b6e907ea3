"""The shipped composition methods: the linear operators, SuperDiff AND/OR, the exact mixture,
the selector and the parameter merge. Torch-free at import (see `robocompose.composition.methods`);
the package imports this module first, so every lookup finds them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from robocompose.composition.methods import (
    Composition,
    CompositionMethod,
    DenoiserMethod,
    Weights,
    get_method,
    register_method,
)
from robocompose.composition.weight_search import simplex_grid

if TYPE_CHECKING:
    import torch

    from robocompose.composition.config import CompositionConfig
    from robocompose.composition.operators import Operator
    from robocompose.policies.base import GenerativePolicy

# SuperDiff integrates the reverse SDE by Euler-Maruyama, whose noise per step is too large on a
# coarse grid: at 10 steps PickPlace's 99% flow composed with itself by OR succeeds 0-5% of the
# time, at 40 steps 100% (20 episodes each).
SUPERDIFF_STEPS = 40


@register_method("convex")
class ConvexMethod(DenoiserMethod):
    """GPC: D = sum_i w_i D_i with w on the simplex; a search tries the simplex grid."""

    weights_sum_to_one = True
    weights_nonnegative = True
    searchable = True
    title = "GPC convex"

    def search_weights(self, parents: int, step: float) -> list[Weights]:
        return simplex_grid(parents, step)

    def operator(self, config: CompositionConfig) -> Operator:
        from robocompose.composition.operators import Convex

        return Convex(config.weights)


@register_method("weighted_sum")
class ProductMethod(DenoiserMethod):
    """Product of experts: a sum of scores; weights not summing to 1 need a finite sigma_max."""

    weights_nonnegative = True
    searchable = True
    title = "product of experts"

    def search_weights(self, parents: int, step: float) -> list[Weights]:
        """The product of experts (every weight 1) and each parent sharpened (weight 2, the
        others 0): points off the simplex, which no convex weight reaches."""
        sharpened = [tuple(2.0 * (i == j) for i in range(parents)) for j in range(parents)]
        return [(1.0,) * parents, *sharpened]

    def needs_finite_sigma_max(self, config: CompositionConfig) -> bool:
        return abs(sum(config.weights) - 1) > 1e-6

    def operator(self, config: CompositionConfig) -> Operator:
        from robocompose.composition.operators import WeightedSum

        return WeightedSum(config.weights)


@register_method("guided")
class GuidedMethod(DenoiserMethod):
    """Composable Diffusion AND/NOT: parent 0 is the base, a negative weight is NOT."""

    def operator(self, config: CompositionConfig) -> Operator:
        from robocompose.composition.operators import Guided

        return Guided(config.weights)


@register_method("schedule")
class ScheduleMethod(DenoiserMethod):
    """Convex `weights` above sigma_switch, convex `low_weights` below it."""

    weights_sum_to_one = True
    weights_nonnegative = True

    def check(self, config: CompositionConfig) -> None:
        if config.low_weights is None:
            raise ValueError("`low_weights` must be set for operator 'schedule'.")
        super().check(config)

    def operator(self, config: CompositionConfig) -> Operator:
        from robocompose.composition.operators import Schedule

        assert config.low_weights is not None  # `check` refused it
        return Schedule(config.weights, config.low_weights, config.sigma_switch)


class SuperDiffMethod(CompositionMethod):
    """SuperDiff (Skreta et al. 2024): per-step, per-row weights from Ito log-density
    estimates, sampled by its own Euler-Maruyama loop (the configured sampler is not used)."""

    mode: str
    default_steps = SUPERDIFF_STEPS

    def needs_finite_sigma_max(self, config: CompositionConfig) -> bool:
        return True

    def operator(self, config: CompositionConfig) -> Operator:
        """The parents' outputs are plumbed as an equal convex pair; the weights are per step."""
        from robocompose.composition.operators import Convex

        return Convex([1.0 / len(config.weights)] * len(config.weights))

    def sample(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        from robocompose.composition.samplers import row_generators
        from robocompose.composition.superdiff import sample_superdiff

        horizons = {p.config.horizon for p in policy.parents}
        if len(set(policy.starts)) != 1 or len(horizons) != 1:
            raise ValueError("SuperDiff needs parents with one horizon and history length.")
        denoiser = policy.denoiser(obs)
        return sample_superdiff(
            denoiser.parent_outputs,
            noise,
            policy.sigmas(denoiser),
            generator=row_generators(noise),
            mode=self.mode,
            weights=policy.config.weights,
        )


@register_method("superdiff_and")
class SuperDiffAndMethod(SuperDiffMethod):
    mode = "and"


@register_method("superdiff_or")
class SuperDiffOrMethod(SuperDiffMethod):
    mode = "or"


@register_method("mixture")
class MixtureMethod(CompositionMethod):
    """OR as an exact mixture: each env draws one parent per chunk with probability w_i, which
    samples alone with its own sampler."""

    extra_noise_rows = 1  # the per-chunk draw of which parent to run
    samples_full_chunk = False  # parents of other horizons: only the executed steps align
    weights_nonnegative = True

    def predict_actions(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        """The draw is made on the CPU in float64 from the extra noise row, so every device and
        dtype picks the same parent for the same noise."""
        import torch

        weights = torch.tensor(policy.config.weights, dtype=torch.float64)
        u = torch.special.ndtr(noise[:, -1, 0].cpu().double())  # extra noise row -> U(0, 1)
        cdf = torch.cumsum(weights / weights.sum(), 0)
        choice = torch.searchsorted(cdf, u.contiguous()).clamp(max=len(policy.parents) - 1)
        n_exec = policy.executed.stop - policy.executed.start
        out = noise.new_empty(noise.shape[0], n_exec, noise.shape[-1])
        policy.chosen_sources = [f"parent{i}" for i in choice.tolist()]
        for i, parent in enumerate(policy.parents):
            rows = torch.nonzero(choice == i).flatten().to(noise.device)
            if len(rows) == 0:
                continue
            view = {k: v[rows] for k, v in policy.parent_view(parent, obs).items()}
            steps = policy.steps
            with policy.times.sampling(i, len(rows)):
                chunk = parent.sample(view, steps, noise[rows, : parent.config.horizon])
            begin = policy.executed.start - policy.starts[i]  # parent i's current step
            out[rows] = chunk[:, begin : begin + n_exec]
        return out


@register_method("merge")
class MergeMethod(CompositionMethod):
    """Parameter merge (model soup): theta = sum_i w_i theta_i, one policy that samples with
    its own sampler; the composition settings other than `weights` do not apply to it."""

    merges_parameters = True

    def build(
        self, parents: Sequence[GenerativePolicy], config: CompositionConfig
    ) -> GenerativePolicy:
        from robocompose.composition.merge import merge_parameters

        merged = merge_parameters(parents, config.weights)
        return merged.set_n_action_steps(config.n_action_steps)  # a new policy: its own


@register_method("selector")
class SelectorMethod(CompositionMethod):
    """At every chunk, `selector_samples` native samples of each parent and one composition
    at `weights` (convex, or `selector_composition`'s operator); per row the candidate the
    score (`selector_score`) rates best is executed (`robocompose.composition.selector`): by
    default the one the others agree with most (the medoid of the executed steps), no reward,
    no training; `verifier`: a verifier trained on chunk logs. Out of the defaults:
    docs/results/composition.md shows how its scores rank."""

    samples_full_chunk = False  # candidates of other horizons: only the executed steps align
    weights_nonnegative = True

    def check(self, config: CompositionConfig) -> None:
        super().check(config)
        try:  # the composed candidate's rules for `weights` (convex: on the simplex)
            self._composed(config).check(config)
        except ValueError as e:
            raise ValueError(
                f"{e} (the selector's composed candidate: selector_composition="
                f"{config.selector_composition})"
            ) from None
        learned = config.selector_score == "verifier"
        if learned and not config.verifier:
            raise ValueError(
                "`verifier` must name a verifier file for selector_score 'verifier' "
                "(`robocompose verifier` trains one from chunk logs)."
            )
        if config.verifier and not learned:
            raise ValueError(
                f"`verifier` is read by selector_score 'verifier' only. Got selector_score "
                f"{config.selector_score!r}: set selector_score=verifier, or drop `verifier`."
            )
        if learned and not Path(config.verifier).is_file():
            raise ValueError(f"`verifier` {config.verifier} is not a file.")
        contrast = config.selector_score == "contrast"
        if contrast and len(config.selector_contrast or ()) != len(config.weights):
            raise ValueError(
                "`selector_contrast` must name a weaker checkpoint of each parent for "
                f"selector_score 'contrast' ({len(config.weights)} parents). Got "
                f"{config.selector_contrast}."
            )
        if config.selector_contrast is not None and not contrast:
            raise ValueError(
                "`selector_contrast` is read by selector_score 'contrast' only. Got "
                f"selector_score {config.selector_score!r}."
            )

    def verifier_file(self, config: CompositionConfig) -> str | None:
        return config.verifier if config.selector_score == "verifier" else None

    def contrast_checkpoints(self, config: CompositionConfig) -> list[str] | None:
        return list(config.selector_contrast or ()) if config.selector_score == "contrast" else None

    @staticmethod
    def _composed(config: CompositionConfig) -> CompositionMethod:
        return get_method(config.selector_composition)

    def needs_finite_sigma_max(self, config: CompositionConfig) -> bool:
        return self._composed(config).needs_finite_sigma_max(config)

    def operator(self, config: CompositionConfig) -> Operator:
        return self._composed(config).operator(config)

    def choose(
        self,
        policy: Composition,
        obs: dict[str, torch.Tensor],
        noise: torch.Tensor,
        previous: torch.Tensor | None = None,
        score: str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per row the best candidate by `score` (None: the config's `selector_score`; with
        `selector_margin`, the composed candidate unless another scores more than it above;
        `previous`: the whole chunk executed last, for the scores that keep to it): its
        executed steps (B, n, A) and its whole chunk (B, H, A; None where the parents' chunks
        do not align), normalised. Which candidate each row ran goes to
        `policy.chosen_sources`."""
        import torch

        from robocompose.chunk_log import COMPOSITION
        from robocompose.composition.selector import candidates, score_of

        found = candidates(policy, obs, noise, policy.config.selector_samples)
        rate = score_of(score or policy.config.selector_score)
        scores = rate(policy, obs, found, previous)  # (C, B)
        best = scores.argmax(0)  # (B,)
        margin = policy.config.selector_margin
        if margin > 0:  # the composed candidate stands unless another clearly beats it
            composed = found.sources.index(COMPOSITION)
            stands = scores.max(0).values - scores[composed] <= margin
            best = torch.where(stands, composed, best)
        policy.chosen_sources = [found.sources[c] for c in best.tolist()]
        rows = torch.arange(found.executed.shape[1], device=found.executed.device)
        full = None if found.full is None else found.full[best, rows]
        return found.executed[best, rows], full

    def predict_actions(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        chosen, _ = self.choose(policy, obs, noise)
        return policy.parents[0].action_normalizer.unnormalize(chosen)
