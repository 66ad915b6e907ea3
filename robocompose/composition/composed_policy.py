"""A composed policy: K pretrained parents, a composition method and weights; runs in the harness.

Each parent keeps its own observation keys and history length (it takes the last n_obs_steps
frames of the shared history) and its own horizon (aligned on the current step, see
`ComposedDenoiser`). All parents must act in one normalised action space: matching normalisers, or
an explicit opt-in (`allow_normalizer_mismatch`) that maps each parent affinely into the first's
space, which rescales the noise per dimension and is therefore not exact.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from robocompose.composition.composed_denoiser import ActionMap, ComposedDenoiser, karras_sigmas
from robocompose.composition.config import FINITE_SIGMA_SAMPLERS, CompositionConfig
from robocompose.composition.fused import (
    BoundStack,
    StackedNetwork,
    stack_groups,
    stack_networks,
)
from robocompose.composition.methods import method_of
from robocompose.composition.samplers import SAMPLERS, DenoiseFn, RowGenerators
from robocompose.composition.timing import ParentTimes
from robocompose.composition.verifier import Verifier, load_verifier, target_of
from robocompose.evaluation import parent_name
from robocompose.policies.base import GenerativePolicy


def action_maps(
    parents: Sequence[GenerativePolicy],
    allow_mismatch: bool,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> list[ActionMap | None]:
    """Affine maps from parent 0's normalised actions to each parent's, as tensors of `dtype`
    on `device` (computed there, not cast from float32); refuse unless allowed."""
    ref = parents[0].action_normalizer
    maps: list[ActionMap | None] = [None]
    for i, parent in enumerate(parents[1:], start=1):
        norm = parent.action_normalizer
        if norm.allclose(ref):
            maps.append(None)
            continue
        if not allow_mismatch:
            raise ValueError(
                f"parent {i}'s action normaliser differs from parent 0's (scale {norm.scale} vs "
                f"{ref.scale}). Composing then rescales the noise per action dimension; pass "
                "allow_normalizer_mismatch=True to compose in parent 0's space anyway."
            )
        scale, offset = norm.tensors(dtype, device)
        ref_scale, ref_offset = ref.tensors(dtype, device)
        maps.append(ActionMap(scale / ref_scale, offset - ref_offset * scale / ref_scale))
    return maps


_EXECUTOR: ThreadPoolExecutor | None = None


def shared_executor() -> ThreadPoolExecutor:
    """One thread pool for every composed policy of the process (parents run concurrently)."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="parent")
    return _EXECUTOR


def parent_names(parents: Sequence[GenerativePolicy]) -> list[str]:
    """Each parent's checkpoint folder name (else "parent i"), made unique by its place."""
    names = [parent_name(p, i) for i, p in enumerate(parents)]
    return [f"{n} ({i})" if names.count(n) > 1 else n for i, n in enumerate(names)]


class ComposedPolicy:
    """A `ChunkPredictor` (see `robocompose.policies.runner`) over K composed parents.

    What it runs is the config's method (`method_of(config)`, see `composition.methods`). It runs
    where its parents are, in their dtype; `to(...)` moves them all. What it derives from the
    parents' weights (the fused network, the action maps) follows them there."""

    def __init__(self, parents: Sequence[GenerativePolicy], config: CompositionConfig) -> None:
        if len(parents) < 2:
            raise ValueError(f"composition needs >= 2 parents. Got {len(parents)}.")
        config.check_parent_count(len(parents))
        dims = [p.config.action_dim for p in parents]
        if len(set(dims)) != 1:
            raise ValueError(f"parents must share one action dimension. Got {dims}.")
        self.method = method_of(config)
        if (config.grid_parent() or 0) >= len(parents):
            raise ValueError(
                f"`grid` {config.grid!r} names a parent that is not there: parents are "
                f"0..{len(parents) - 1}."
            )
        if self.method.merges_parameters:
            raise ValueError(
                f"operator {config.operator!r} merges the parents into one policy, not a "
                "ComposedPolicy; build it with `robocompose.composition.compose`."
            )
        self.parents = list(parents)
        self.config = config
        action_maps(parents, config.allow_normalizer_mismatch)  # refuse before anything else
        ref = parents[0].config
        self.obs_keys = tuple(dict.fromkeys(k for p in parents for k in p.config.obs_keys))
        self.n_obs_steps = max(p.config.n_obs_steps for p in parents)
        # align chunks on the current step: parent i's step n_i - 1 is the reference's n_0 - 1
        self.starts = [ref.n_obs_steps - p.config.n_obs_steps for p in parents]
        self.noise_shape = (ref.horizon + self.method.extra_noise_rows, ref.action_dim)
        self.executed = parents[0].executed_slice(config.n_action_steps)
        self.operator = self.method.operator(config)
        self._executor = shared_executor() if config.parallel else None
        fuse = config.fuse and self.operator is not None
        self._groups = stack_groups(parents) if fuse else None
        self._placed_for: tuple[torch.device, torch.dtype] | None = None
        self._probes: list[torch.nn.Parameter | None] | None = None
        self._sigmas: list[float] | None = None
        self._place()
        # what each parent costs per chunk, over every chunk this policy infers
        parallel = self._executor is not None and (self._groups is None or len(self._groups) > 1)
        self.times = ParentTimes(parent_names(parents), parallel=parallel)
        self.verifier = self._verifier()
        self.contrast = self._contrast()
        self.chosen_sources: list[str] | None = None

    def _verifier(self) -> Verifier | None:
        """The learned verifier the method scores by, checked against these parents."""
        file = self.method.verifier_file(self.config)
        if file is None:
            return None
        verifier = load_verifier(file)
        n_exec = self.executed.stop - self.executed.start
        verifier.check_fits(target_of(self.parents, parent_names(self.parents), n_exec))
        return verifier.to(*self._placement())

    def _contrast(self) -> list[GenerativePolicy] | None:
        """The weaker checkpoints the method scores against, each checked against its parent:
        its samples must be chunks of the same steps and actions, from the same observations."""
        paths = self.method.contrast_checkpoints(self.config)
        if paths is None:
            return None
        from robocompose.policies.checkpoint import load_policy

        weak = [load_policy(p) for p in paths]  # its own copy: moved with this policy
        for i, (parent, other, path) in enumerate(zip(self.parents, weak, paths, strict=True)):
            mine, theirs = parent.config, other.config
            for field in ("obs_keys", "obs_shapes", "n_obs_steps", "horizon", "action_dim"):
                if getattr(mine, field) != getattr(theirs, field):
                    raise ValueError(
                        f"selector_contrast[{i}] ({path}) must be a weaker checkpoint of parent "
                        f"{i}: its {field} is {getattr(theirs, field)}, the parent's "
                        f"{getattr(mine, field)}."
                    )
            other.to(*self._placement())
        return weak

    @property
    def steps(self) -> int:
        """Denoising steps per chunk: `config.steps`, else the method's default."""
        return self.method.denoising_steps(self.config)

    @property
    def device(self) -> torch.device:
        return self._placement()[0]

    @property
    def dtype(self) -> torch.dtype:
        return self._placement()[1]

    def to(self, *args, **kwargs) -> ComposedPolicy:
        """Move every parent, as `nn.Module.to` does (a device, a dtype or both)."""
        for parent in self.parents:
            parent.to(*args, **kwargs)
        if self.verifier is not None:
            self.verifier.to(*args, **kwargs)
        for weak in self.contrast or ():
            weak.to(*args, **kwargs)
        self._probes = None  # a conversion that swaps parameters leaves no stale probe
        self._place()
        return self

    @property
    def maps(self) -> list[ActionMap | None]:
        """Parent 0's normalised actions -> each parent's, on the parents' device and dtype."""
        return self._place()[0]

    @property
    def fused(self) -> StackedNetwork | None:
        """The parents' backbones as one stacked network, when they all fuse (see `fusable`)."""
        stacks = self._place()[1]
        return stacks[0][1] if stacks is not None and len(stacks) == 1 else None

    @property
    def stacks(self) -> list[tuple[list[int], StackedNetwork]] | None:
        """Each group of parents of one backbone config and its stacked network (see
        `stack_groups`), or None when the parents run their own networks."""
        return self._place()[1]

    def _placement(self) -> tuple[torch.device, torch.dtype]:
        """Where the parents are, read off one parameter of each: `.to()` converts parameters
        in place, so one parameter tells; `parent.device` would walk the module tree, twice
        per parent and chunk."""
        if self._probes is None:  # None for a parent with no torch parameter (a JAX policy)
            self._probes = [next(p.parameters(), None) for p in self.parents]
        (first, *rest) = [
            (p.device, p.dtype) if q is None else (q.device, q.dtype)
            for p, q in zip(self.parents, self._probes, strict=True)
        ]
        for i, (device, dtype) in enumerate(rest, start=1):
            if (device, dtype) != first:
                raise ValueError(
                    f"composed parents must sit on one device in one dtype: parent 0 is on "
                    f"{first[0]} in {first[1]}, parent {i} on {device} in {dtype}. Move them "
                    "together with `composed.to(...)`."
                )
        return first

    def _place(
        self,
    ) -> tuple[list[ActionMap | None], list[tuple[list[int], StackedNetwork]] | None]:
        """The action maps and fused network for where the parents are now, rebuilt when a
        parent has moved since the last call."""
        placement = self._placement()
        if placement != self._placed_for:
            device, dtype = placement
            allow = self.config.allow_normalizer_mismatch
            self._maps = action_maps(self.parents, allow, dtype, device)
            self._stacks = None
            self._folds: dict = {}  # the fused stacks' folded operator by sigma (see there)
            self._tables: dict = {}  # each stack's timestep tables by grid (see BoundStack)
            if self._groups is not None:
                self._stacks = [
                    (group, stack_networks([self.parents[i].net for i in group]).eval())
                    for group in self._groups
                ]
            self._placed_for = placement
        return self._maps, self._stacks

    def denoiser(self, obs: dict[str, torch.Tensor]) -> ComposedDenoiser:
        """The parents' denoisers for one observation batch (each conditions on its own view),
        combined by the method's operator, prepared for the configured grid (see
        `Denoiser.prepare`)."""
        if self.operator is None:
            raise ValueError(f"operator {self.config.operator!r} evaluates no parents jointly.")
        maps, stacks = self._place()
        rows = next(iter(obs.values())).shape[0]
        conds = []
        for i, parent in enumerate(self.parents):
            with self.times.encoding(i, rows):
                conds.append(parent.encode(self.parent_view(parent, obs)))
        bound = [p.denoiser_for(c) for p, c in zip(self.parents, conds, strict=True)]
        bound_stacks = None
        if stacks is not None:
            bound_stacks = [
                BoundStack(
                    net,
                    [bound[i] for i in group],
                    torch.stack([conds[i] for i in group]),
                    group,
                    tables=self._tables.setdefault(j, {}),
                )
                for j, (group, net) in enumerate(stacks)
            ]
        denoiser = ComposedDenoiser(
            bound,
            self.operator,
            self.starts,
            maps,
            self._executor,
            stacks=bound_stacks,
            times=self.times,
            folds=self._folds,
        )
        denoiser.prepare(self.sigmas(denoiser))
        return denoiser

    def sigmas(self, denoiser: ComposedDenoiser) -> list[float]:
        """The configured grid (`_grid`), worked out on the first chunk and kept: it depends on
        the parents and the settings, never on an observation."""
        if self._sigmas is None:
            self._sigmas = self._grid(denoiser)
        return self._sigmas

    def _grid(self, denoiser: ComposedDenoiser) -> list[float]:
        """The configured grid: the composed denoiser's choice among the parents' grids
        ("reference"), one parent's own ("parent<i>"), or Karras; a Karras grid also where the
        method or sampler needs a finite sigma_max and the reference choice starts at inf."""
        cfg = self.config
        steps = self.steps
        finite = self.method.needs_finite_sigma_max(cfg) or cfg.sampler in FINITE_SIGMA_SAMPLERS
        own = cfg.grid_parent()
        if own is not None:
            return self._parent_grid(denoiser, own, finite)
        grid = denoiser.sigmas(steps) if cfg.grid == "reference" else None
        if grid is None or (math.isinf(grid[0]) and finite):
            grid = karras_sigmas(steps, cfg.sigma_min, cfg.sigma_max)
        return grid

    def _parent_grid(self, denoiser: ComposedDenoiser, i: int, finite: bool) -> list[float]:
        """Parent i's own grid, refused where a parent or the method cannot start at its top."""
        grid = denoiser.parents[i].sigmas(self.steps)
        if math.isinf(grid[0]):
            unsound = [k for k, p in enumerate(denoiser.parents) if not p.sound_at_inf]
            if finite or unsound:
                who = f"parent {unsound[0]}" if unsound else f"{self.config.operator!r}"
                raise ValueError(
                    f"`grid` parent{i}: that grid starts at sigma = inf, where {who} cannot "
                    "start; choose another parent's grid, 'reference' or 'karras'."
                )
        return grid

    def run_sampler(
        self, denoise: DenoiseFn, noise: torch.Tensor, sigmas: list[float]
    ) -> torch.Tensor:
        """The configured sampler on `denoise`. Its random draws come from per-row generators
        seeded by each row's own noise, so an episode's chunks do not depend on the batch it
        ran in."""
        sampler = SAMPLERS[self.config.sampler]
        generator = RowGenerators(noise)
        return sampler(denoise, noise, sigmas, generator=generator, **self.config.sampler_kwargs)

    def sample_normalized(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        """Composed chunks (B, H_0, A) in parent 0's normalised action space, by the method.

        With parallel parents each runs on one torch thread: K threads each asking for all
        cores would oversubscribe them."""
        if self._executor is None:
            return self.method.sample(self, obs, noise)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self.method.sample(self, obs, noise)
        finally:
            torch.set_num_threads(threads)

    def resolved_sigmas(self) -> list[float] | None:
        """The grid the method samples on (None for methods that sample each parent with its
        own sampler): known without an observation, since no grid depends on one."""
        if self.operator is None:
            return None
        unbound = [p.denoiser_for(None) for p in self.parents]  # the nets are never called
        return self._grid(ComposedDenoiser(unbound, self.operator, self.starts))

    def fingerprint(self) -> str:
        """Hashes everything that changes actions: the parents, the settings and the resolved
        sigma grid (a Karras grid replaces the reference one when the method needs it); a
        verifier by its file's content and weaker checkpoints by theirs, wherever they lie."""
        parts = [p.fingerprint() for p in self.parents]
        config = self.config.as_record() | {
            "steps": self.steps,
            "sigmas": self.resolved_sigmas(),
        }
        if self.verifier is not None:
            config["verifier"] = self.verifier.digest
        if self.contrast is not None:
            config["selector_contrast"] = [p.fingerprint() for p in self.contrast]
        for how_it_runs in ("parallel", "fuse"):  # the same actions to float rounding
            del config[how_it_runs]
        text = json.dumps([parts, config], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @torch.no_grad()
    def predict_actions(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        device, dtype = self._placement()
        obs = {k: v.to(device) for k, v in obs.items() if k in self.obs_keys}
        noise = noise.to(device=device, dtype=dtype)
        self.chosen_sources = None  # a method that picks per row sets it
        with self.times.chunk(noise.shape[0]):
            return self.method.predict_actions(self, obs, noise)

    @staticmethod
    def parent_view(
        parent: GenerativePolicy, obs: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        n = parent.config.n_obs_steps
        return {k: obs[k][:, -n:] for k in parent.config.obs_keys}
