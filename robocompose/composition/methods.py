"""Composition methods: one registered object per method says what it needs and how it runs.

The callers (`ComposedPolicy`, `compose`, the verbs' configs, a sweep, the policy server) ask
the method object instead of checking its name: `method_of(config)` is the method a
`CompositionConfig` names, after it has checked that config. Its declarations are class
attributes, read without torch, so a verb's config names and checks a method on the CLI's
torch-free path; `operator`, `sample`, `predict_actions` and `build` import what they run when
they run.

Layers (each imports only those before it): `config` (data) <- `methods` (this registry) <-
`weight_search` <- `builtin_methods` <- `composed_policy` <- `api`. A method's hooks see the
composed policy that runs them through the `Composition` protocol below, so this module never
imports it.

Adding a method: subclass `CompositionMethod` (or `DenoiserMethod` for an operator on the
parents' denoiser outputs) in any module, decorate it with `@register_method("<name>")`, import
that module before use, and add the preset configs/composition/<name>.yaml. A method that sets
`searchable` and lists its `search_weights` joins every test-time search's pool by default. The
built-in methods live in `robocompose.composition.builtin_methods`, which the package imports
first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    import torch

    from robocompose.composition.composed_denoiser import ComposedDenoiser
    from robocompose.composition.config import CompositionConfig
    from robocompose.composition.operators import Operator
    from robocompose.composition.samplers import DenoiseFn
    from robocompose.composition.timing import ParentTimes
    from robocompose.composition.verifier import Verifier
    from robocompose.policies.base import GenerativePolicy

DEFAULT_STEPS = 10
SIMPLEX_ATOL = 1e-6
Weights = tuple[float, ...]


def on_simplex(weights: Sequence[float]) -> bool:
    """Every weight >= 0 and their sum 1 (to float rounding): a convex combination."""
    return min(weights) >= -SIMPLEX_ATOL and abs(sum(weights) - 1.0) <= 1e-4


class Composition(Protocol):
    """What a method's hooks use of the `ComposedPolicy` running them: K parents, the config,
    where each parent's chunk starts and which steps run, the joint denoiser and its grid."""

    parents: list[GenerativePolicy]
    config: CompositionConfig
    starts: list[int]  # parent i's chunk begins this many steps after parent 0's
    executed: slice  # the steps of parent 0's chunk that are executed
    times: ParentTimes
    verifier: Verifier | None  # the learned verifier the method scores by (`verifier_file`)
    contrast: list[GenerativePolicy] | None  # weaker parents (`contrast_checkpoints`)
    # a method that picks each row's chunk among candidates says which, per row, in every call
    # ("parent<i>" or "composition"; a chunk log records it); None: the composition's own
    chosen_sources: list[str] | None

    @property
    def steps(self) -> int: ...

    def denoiser(self, obs: dict[str, torch.Tensor]) -> ComposedDenoiser: ...

    def sigmas(self, denoiser: ComposedDenoiser) -> list[float]: ...

    def run_sampler(
        self, denoise: DenoiseFn, noise: torch.Tensor, sigmas: list[float]
    ) -> torch.Tensor: ...

    def sample_normalized(
        self, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor: ...

    def parent_view(
        self, parent: GenerativePolicy, obs: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]: ...


class CompositionMethod:
    """How K parents become one policy. Subclasses set the declarations and override the
    hooks their kind of method runs by; the defaults describe a composition that samples
    one chunk per observation batch by `sample`."""

    name: ClassVar[str] = ""
    default_steps: ClassVar[int] = DEFAULT_STEPS  # when `steps` is left unset
    # one Denoiser D(x, sigma) of the composition exists (prefix guidance and the configured
    # sampler run on it)
    single_denoiser: ClassVar[bool] = False
    extra_noise_rows: ClassVar[int] = 0  # noise rows per chunk beyond the reference horizon
    # `sample` gives the whole reference chunk; False: only `predict_actions` (executed steps)
    samples_full_chunk: ClassVar[bool] = True
    # one policy with the weighted parents' parameters, not a ComposedPolicy: the parents must
    # share one architecture (a sweep skips cells whose parents do not)
    merges_parameters: ClassVar[bool] = False
    weights_sum_to_one: ClassVar[bool] = False
    weights_nonnegative: ClassVar[bool] = False
    # a test-time search races its `search_weights` by default (`weight_search.SearchSettings`)
    searchable: ClassVar[bool] = False
    title: ClassVar[str] = ""  # in words, for a search's table and plot; "": the name

    def check(self, config: CompositionConfig) -> None:
        """Refuse a config this method cannot run, naming the field (torch-free)."""
        weights = list(config.weights)
        negative = any(w < -SIMPLEX_ATOL for w in weights)
        if self.weights_sum_to_one and not on_simplex(weights):
            raise ValueError(
                f"`weights` of {self.name} must lie on the simplex (>= 0, sum 1). Got {weights}."
            )
        if self.weights_nonnegative and negative:
            raise ValueError(f"`weights` of {self.name} must be >= 0. Got {weights}.")

    def search_weights(self, parents: int, step: float) -> list[Weights]:
        """The weight vectors a search tries for `parents` parents (`step`: the simplex grid's
        step, for a method whose weights lie on it)."""
        raise NotImplementedError(f"{type(self).__name__} is searchable but lists no weights.")

    def denoising_steps(self, config: CompositionConfig) -> int:
        """`config.steps`, or this method's default when unset (left unset in the config, so a
        config built for one method and switched to another gets the new default)."""
        return config.steps if config.steps is not None else self.default_steps

    def needs_finite_sigma_max(self, config: CompositionConfig) -> bool:
        """Whether the sampling grid must start at a finite sigma (a Karras grid otherwise)."""
        return False

    def verifier_file(self, config: CompositionConfig) -> str | None:
        """The learned verifier file this method scores by (the composed policy loads it and
        checks it fits), None for none."""
        return None

    def contrast_checkpoints(self, config: CompositionConfig) -> list[str] | None:
        """Weaker checkpoints of the parents this method scores against (the composed policy
        loads them and checks each fits its parent), None for none."""
        return None

    def operator(self, config: CompositionConfig) -> Operator | None:
        """What combines the parents' denoiser outputs at one (x, sigma); None when the parents
        are not evaluated jointly."""
        return None

    def build(
        self, parents: Sequence[GenerativePolicy], config: CompositionConfig
    ) -> GenerativePolicy | None:
        """The policy of a method that is not run as a `ComposedPolicy` (a parameter merge);
        None: the parents run as a `ComposedPolicy`."""
        return None

    def sample(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        """Composed chunks (B, H_0, A) in parent 0's normalised action space."""
        raise ValueError(f"operator {self.name!r} samples no whole chunk; use predict_actions.")

    def predict_actions(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        """The executed actions (B, n_action_steps, A) in env units."""
        chunk = policy.sample_normalized(obs, noise)
        return policy.parents[0].action_normalizer.unnormalize(chunk)[:, policy.executed]


class DenoiserMethod(CompositionMethod):
    """An operator on the parents' denoiser outputs, sampled by the configured sampler."""

    single_denoiser = True

    def operator(self, config: CompositionConfig) -> Operator:
        raise NotImplementedError(f"{type(self).__name__} must define its operator.")

    def sample(
        self, policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> torch.Tensor:
        denoiser = policy.denoiser(obs)
        return policy.run_sampler(denoiser, noise, policy.sigmas(denoiser))


_REGISTRY: dict[str, CompositionMethod] = {}
M = TypeVar("M", bound=type[CompositionMethod])


def register_method(name: str) -> Callable[[M], M]:
    """Class decorator: the method is known as `name` (the config's `operator`)."""

    def add(cls: M) -> M:
        if name in _REGISTRY:
            raise ValueError(f"composition method {name!r} is already registered.")
        cls.name = name
        _REGISTRY[name] = cls()
        return cls

    return add


def method_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def searchable_methods() -> tuple[str, ...]:
    """The methods a search races unless told otherwise: those declaring `searchable`."""
    return tuple(name for name, method in _REGISTRY.items() if method.searchable)


def method_title(name: str) -> str:
    """The registered method `name` in words ("GPC convex"), or its name."""
    return get_method(name).title or name


def get_method(name: str) -> CompositionMethod:
    if name not in _REGISTRY:
        raise ValueError(f"`operator` must be one of {tuple(_REGISTRY)}. Got {name!r}.")
    return _REGISTRY[name]


def method_of(config: CompositionConfig) -> CompositionMethod:
    """The method `config.operator` names, once it has refused what it cannot run (naming the
    field): the check a `CompositionConfig`, which is data, leaves to its method."""
    method = get_method(config.operator)
    method.check(config)
    return method
