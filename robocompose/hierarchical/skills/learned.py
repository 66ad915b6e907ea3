"""Skills run by trained or composed diffusion/flow policies instead of scripts.

`place_in(obj, bin)` can be driven by a shipped PickPlace policy: PickPlace's state is
[ee xyz, finger opening, cube x, y, z, cos 4yaw, sin 4yaw, target x, y], so on a SortBins table
the skill builds that observation from the chosen block and the chosen bin's centre (a flat
zone of the same radius and range as PickPlace's target disc) and runs the policy through
`PolicyRunner` until the skill's success check holds or `max_steps` pass. The other blocks are
invisible to the policy: they are obstacles it may knock.

`pick(obj)` and `place(obj, target)` can be driven by a skill-conditioned policy (one network
for both, trained on the experts' skill segments, `make train-skills`): it observes the
gripper, the argument objects' positions and the skill's language tokens
(`robocompose.sim.skill_labels`), all read from the world each step. A call ends when its end
check holds or after `max_steps`: pick when the block is held clear of the other blocks, place
when the block rests released on its target and the hand has withdrawn above it.

Which implementation runs is chosen per skill by a spec string (CLI- and config-friendly):

    "scripted"                                          the primitive of `scripted.py`
    "policy:PickPlace_flow_mlp"                         one checkpoint (a shipped name or a folder)
    "composed:PickPlace_diffusion_unet+PickPlace_flow_mlp:convex:0.5,0.5"
                                                        parents + operator + weights
    "learned:Tabletop_skills_flow_mlp"                  a skill-conditioned checkpoint (pick, place)
    "learned:Tabletop_skills_diffusion_mlp+Tabletop_skills_flow_mlp:convex:0.5,0.5"
                                                        skill-conditioned parents composed

    registry = registry_for(world, {"place_in": "policy:PickPlace_flow_mlp"})
    registry = registry_for(world, {"pick": "learned:Tabletop_skills_flow_mlp", "place": ...})
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.hierarchical.base import Skill, SkillResult
from robocompose.hierarchical.skills.registry import SkillRegistry
from robocompose.hierarchical.skills.scripted import (
    Motion,
    _place_success,
    build_registry,
    declared,
    make_skill,
    place_in_skill,
    place_in_success,
)
from robocompose.hierarchical.world import SimWorld
from robocompose.shipped import checkpoint_folder, shipped_checkpoints
from robocompose.sim.experts.grasping import OPEN
from robocompose.sim.pick_place import CUBE_HALF_M
from robocompose.sim.skill_labels import (
    EMBEDDING_DIM,
    LANGUAGE_KEYS,
    SKILL_ARGS_DIM,
    SKILL_OBS_KEYS,
    SkillLabel,
    pick_label,
    place_label,
    skill_observation,
    tokens,
)

LEARNABLE = ("place_in", "pick", "place")  # skills that take a policy implementation
CONDITIONED = ("pick", "place")  # ... by a skill-conditioned ("learned:") policy
KINDS = ("scripted", "policy", "composed", "learned", "learned_composed")
LIFT_CLEAR_M = 0.03  # a learned pick ends once the held block's bottom clears the others by this
WITHDRAWN_M = 0.04  # a learned place ends once the open hand is this far above the block's top
PICK_PLACE_STATE_DIM = 11
START_LOW, START_HIGH, START_Z_M = -0.1, 0.1, 0.15  # PickPlace's start: ee xy range, height


@dataclass(frozen=True)
class PolicySkillConfig:
    """A policy implementation of a skill: one checkpoint, or parents composed by an operator.

    `checkpoints` are shipped names or paths."""

    checkpoints: tuple[str, ...]
    operator: str = "convex"
    weights: tuple[float, ...] | None = None
    max_steps: int = 150  # PickPlace's episode limit
    seed: int = 0  # sampling noise; each call adds the world's call index
    conditioned: bool = False  # a skill-conditioned policy ("learned:"), not a PickPlace one

    def __post_init__(self) -> None:
        if not self.checkpoints:
            raise ValueError("`checkpoints` must name at least one checkpoint. Got none.")
        if self.weights is not None and len(self.weights) != len(self.checkpoints):
            raise ValueError(
                f"`weights` must have one entry per checkpoint ({len(self.checkpoints)}). "
                f"Got {len(self.weights)}."
            )
        if self.max_steps < 1:
            raise ValueError(f"`max_steps` must be >= 1. Got {self.max_steps}.")

    @property
    def kind(self) -> str:
        single = len(self.checkpoints) == 1
        if self.conditioned:
            return "learned" if single else "learned_composed"
        return "policy" if single else "composed"

    @classmethod
    def parse(cls, spec: str, **overrides: Any) -> PolicySkillConfig:
        """From "policy:<ckpt>", "composed:<ckpt>+<ckpt>[:<operator>[:<w>,<w>]]" or
        "learned:<ckpt>[+<ckpt>...[:<operator>[:<w>,<w>]]]"."""
        kind, _, rest = spec.partition(":")
        if kind not in ("policy", "composed", "learned") or not rest:
            raise ValueError(
                f"a policy skill spec must read 'policy:<checkpoint>', "
                f"'composed:<ckpt>+<ckpt>[:<operator>[:<w1>,<w2>]]' or "
                f"'learned:<ckpt>[+<ckpt>[:<operator>[:<w1>,<w2>]]]'. Got {spec!r}."
            )
        if kind == "learned":
            overrides = {"conditioned": True, **overrides}
            if "+" not in rest:
                return cls((rest,), **overrides)
        if kind == "policy":
            return cls((rest,), **overrides)
        parts = rest.split(":")
        if len(parts) > 3:
            raise ValueError(f"too many ':' fields in the composed spec {spec!r}.")
        checkpoints = tuple(parts[0].split("+"))
        if len(checkpoints) < 2:
            raise ValueError(f"a composed spec needs 2 or more '+'-joined parents. Got {spec!r}.")
        operator = parts[1] if len(parts) > 1 else "convex"
        try:
            weights = tuple(float(w) for w in parts[2].split(",")) if len(parts) > 2 else None
        except ValueError:
            raise ValueError(f"weights in {spec!r} must be numbers joined by ','.") from None
        return cls(checkpoints, operator, weights, **overrides)


def _folder(name: str) -> Path:
    path = checkpoint_folder(name)
    if (path / "config.json").is_file():
        return path
    have = sorted(p.name for p in shipped_checkpoints())
    raise FileNotFoundError(
        f"no checkpoint {name!r}: neither a folder with config.json nor a shipped name ({have})."
    )


@functools.lru_cache(maxsize=4)
def _predictor(config: PolicySkillConfig) -> Any:
    """The chunk predictor of `config` (loaded once per process: loading takes seconds)."""
    from robocompose.composition.api import compose, load
    from robocompose.policies.runner import PolicyPredictor

    policies = [load(_folder(c)) for c in config.checkpoints]
    for name, policy in zip(config.checkpoints, policies, strict=True):
        if config.conditioned:
            _check_conditioned(name, policy.config)
            continue
        shape = tuple(policy.config.obs_shapes.get("state", ()))
        if tuple(policy.config.obs_keys) != ("state",) or shape != (PICK_PLACE_STATE_DIM,):
            raise ValueError(
                f"{name}: place_in feeds a PickPlace state of shape ({PICK_PLACE_STATE_DIM},); "
                f"the policy takes keys {policy.config.obs_keys} with state shape {shape}."
            )
    if len(policies) == 1:
        return PolicyPredictor(policies[0])
    return compose(policies, config.operator, config.weights)


def _check_conditioned(name: str, config: Any) -> None:
    """A skill-conditioned checkpoint observes proprio, skill_args and one language key, at
    our shapes."""
    shapes = {
        "proprio": (4,),
        "skill_args": (SKILL_ARGS_DIM,),
        "skill_tokens": tokens("pick").shape,
        "skill_embedding": (EMBEDDING_DIM,),
    }
    have = {k: tuple(config.obs_shapes.get(k, ())) for k in config.obs_keys}
    keys = tuple(config.obs_keys)
    if len(keys) != 3 or keys[:2] != ("proprio", "skill_args") or keys[2] not in LANGUAGE_KEYS:
        ok = False
    else:
        ok = all(have[k] == shapes[k] for k in keys)
    if not ok:
        want = {k: shapes[k] for k in SKILL_OBS_KEYS}
        raise ValueError(
            f"{name}: a learned pick/place feeds obs {want} (or skill_embedding "
            f"{shapes['skill_embedding']} for skill_tokens); the policy takes {have}. "
            "Train it with `make train-skills`."
        )


def pick_place_state(world: SimWorld, obj: str, bin: str) -> np.ndarray:
    """(11,) PickPlace state with `obj` as its cube and `bin`'s centre as its target."""
    sim = world.sim
    i, k = world.block_index(obj), world.bin_index(bin)
    return np.concatenate([sim.robot_obs(), sim.cube_obs(i), sim.bin_xy(k)])


def _go_to_start(world: SimWorld, obj: str) -> int:
    """Scripted move into PickPlace's start distribution (open, ee in [-0.1, 0.1]^2 at 15 cm),
    unless the block is already held; returns the steps taken."""
    if world.holding() == obj:
        return 0
    motion = Motion(world)
    x, y, _ = np.clip(world.sim.ee_pos(), START_LOW, START_HIGH)
    goal = np.array([x, y, START_Z_M])
    script = motion.rise_to(START_Z_M, OPEN)
    _, steps, _ = motion.drive(itertools.chain(script, motion.go(lambda: goal, OPEN)), 40)
    return steps


def policy_place_in(config: PolicySkillConfig):
    """The `act` of place_in run by the policy of `config`."""

    def act(world: SimWorld, obj: str, bin: str) -> SkillResult:
        from robocompose.policies.runner import PolicyRunner

        runner = PolicyRunner(_predictor(config), seed=config.seed)
        runner.reset(np.array([True]), seeds=np.array([world.call_index]))
        steps = _go_to_start(world, obj)
        for step in range(steps, config.max_steps):
            if place_in_success(world, obj, bin):
                return SkillResult(True, "", step)
            state = pick_place_state(world, obj, bin)
            action = runner({"state": state[None]})[0]
            world.step(action)
        ok = place_in_success(world, obj, bin)
        message = "" if ok else f"{obj} is not in {bin} after {config.max_steps} policy steps"
        return SkillResult(ok, message, config.max_steps)

    return act


def _label(name: str, args: Mapping[str, Any]) -> SkillLabel:
    return pick_label(args["obj"]) if name == "pick" else place_label(args["obj"], args["target"])


def _lifted_clear(world: SimWorld, obj: str) -> bool:
    """Held, with its bottom LIFT_CLEAR_M above every other block's top (and the table)."""
    if world.holding() != obj:
        return False
    i = world.block_index(obj)
    tops = [world.position(b)[2] + CUBE_HALF_M for b in world.objects() if b != obj]
    return bool(world.sim.cube_pos(i)[2] - CUBE_HALF_M > max(tops, default=0.0) + LIFT_CLEAR_M)


def _placed_and_withdrawn(world: SimWorld, obj: str, target: str) -> bool:
    top = world.position(obj)[2] + CUBE_HALF_M
    return _place_success(world, obj, target) and world.sim.ee_pos()[2] > top + WITHDRAWN_M


def learned_act(name: str, config: PolicySkillConfig, success: Callable[..., bool]):
    """The `act` of pick or place run by the skill-conditioned policy of `config`: each step it
    observes the skill's conditioning read from the world; it stops at the skill's end check or
    after `config.max_steps`, and then `success` (the scripted skill's) judges it."""
    done = {"pick": _lifted_clear, "place": _placed_and_withdrawn}[name]

    def act(world: SimWorld, **args: Any) -> SkillResult:
        from robocompose.policies.runner import PolicyRunner

        label = _label(name, args)
        predictor = _predictor(config)
        language_keys = [k for k in predictor.obs_keys if k in LANGUAGE_KEYS]
        runner = PolicyRunner(predictor, seed=config.seed)
        runner.reset(np.array([True]), seeds=np.array([world.call_index]))
        for step in range(config.max_steps):
            if done(world, **args):
                return SkillResult(True, "", step)
            obs = skill_observation(world.sim, label, language_keys)
            world.step(runner({k: v[None] for k, v in obs.items()})[0])
        ok = success(world, **args)
        message = "" if ok else f"{label.language!r} not done after {config.max_steps} steps"
        return SkillResult(ok, message, config.max_steps)

    return act


def learned_skill(name: str, registry: SkillRegistry, config: PolicySkillConfig) -> Skill:
    """`registry[name]` (pick or place) with its run driven by the policy of `config`."""
    scripted = registry[name]
    if scripted.success is None:
        raise ValueError(f"skill {name!r} has no success check for its learned run to end on.")
    return make_skill(
        name,
        scripted.description,
        scripted.params,
        learned_act(name, config, scripted.success),
        declared(name, scripted.operators),
        scripted.success,
        kind=config.kind,
        operators=scripted.operators,
    )


def registry_for(
    world: SimWorld, implementations: Mapping[str, str | PolicySkillConfig] | None = None
) -> SkillRegistry:
    """`build_registry(world)` with the named skills switched to the given implementation
    ("scripted", a policy spec string, or a `PolicySkillConfig`)."""
    registry = build_registry(world)
    for name, impl in (implementations or {}).items():
        if name not in LEARNABLE:
            raise ValueError(f"skill {name!r} has no learned implementation; have {LEARNABLE}.")
        if name not in registry:
            raise ValueError(f"skill {name!r} needs bins; the {world.task_name} scene has none.")
        if impl == "scripted":
            continue
        config = impl if isinstance(impl, PolicySkillConfig) else PolicySkillConfig.parse(impl)
        if config.conditioned != (name in CONDITIONED):
            need = "a 'learned:' spec" if name in CONDITIONED else "a 'policy:'/'composed:' spec"
            raise ValueError(f"skill {name!r} takes {need}. Got {impl!r}.")
        if config.conditioned:
            registry.add(learned_skill(name, registry, config), replace=True)
            continue
        blocks, bins = tuple(world.objects()), tuple(world.bins())
        skill = place_in_skill(blocks, bins, policy_place_in(config), kind=config.kind)
        registry.add(skill, replace=True)
    return registry
