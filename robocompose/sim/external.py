"""Third-party gymnasium envs as tasks: one config block, one observation adapter.

A task preset (`configs/task/<Name>.yaml`, or a file of your own under `--config-dir`) with an
`external:` block names an env id, the modules whose import registers it, and how its
observation maps to a policy's keys::

    external:
      env_id: FetchReach-v4
      imports: [gymnasium_robotics]
      adapter: {kind: goal}            # {"state": observation + desired_goal}
      expert: robocompose.sim.experts.goal_reaching:GoalReachingExpert

`ExternalEnv` makes that env and wraps it in an `ObservationAdapter`; collection and evaluation
both make the env through it, so demos and rollouts see the same mapping. The dataset records the
whole block in its env kwargs, so a checkpoint trained on it knows its env without the preset.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from robocompose.notices import printed_as_warning

# The source name of a whole non-dict observation (a flat Box, or one image).
WHOLE = "obs"

ADAPTER_KINDS = ("dict", "goal", "box", "pixels")


@dataclass(frozen=True)
class AdapterConfig:
    """How an env's observation becomes the policy's dict of keys.

    The observation is first seen as named sources: a Dict observation's keys, or `obs` for a flat
    Box or an image. `keys` maps each policy key to one source or a list of sources (flattened and
    concatenated, in order). Empty `keys` takes the kind's default:

    | kind   | observation                     | default keys                       |
    |--------|---------------------------------|------------------------------------|
    | dict   | Dict of Boxes                   | every source under its own name    |
    | goal   | observation / achieved / desired | state = observation + desired_goal |
    | box    | flat Box                        | state = obs                        |
    | pixels | (H, W, 3) uint8 image           | image = obs                        |

    `image_size` resizes every image key to a square of that side (nearest pixel).
    """

    kind: str = "dict"
    keys: dict[str, str | list[str]] = field(default_factory=dict)
    image_size: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ADAPTER_KINDS:
            raise ValueError(f"`adapter.kind` must be one of {ADAPTER_KINDS}. Got {self.kind!r}.")
        if self.image_size is not None and self.image_size < 8:
            raise ValueError(f"`adapter.image_size` must be >= 8. Got {self.image_size}.")
        for key, sources in self.keys.items():
            if not isinstance(sources, str) and not (
                isinstance(sources, list | tuple)
                and sources
                and all(isinstance(s, str) for s in sources)
            ):
                raise ValueError(
                    f"`adapter.keys.{key}` must be a source name or a non-empty list of them. "
                    f"Got {sources!r}."
                )

    def mapping(self, sources: Mapping[str, spaces.Space]) -> dict[str, list[str]]:
        """Policy key -> source names, the kind's default when `keys` is empty."""
        if self.keys:
            return {k: [v] if isinstance(v, str) else list(v) for k, v in self.keys.items()}
        if self.kind == "goal":
            return {"state": ["observation", "desired_goal"]}
        if self.kind == "box":
            return {"state": [WHOLE]}
        if self.kind == "pixels":
            return {"image": [WHOLE]}
        return {k: [k] for k in sources}


def _is_image(space: spaces.Space) -> bool:
    return (
        isinstance(space, spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) == 3
        and space.shape[2] == 3
    )


class ObservationAdapter(gym.Wrapper):
    """The env's observation as the policy's keys, and its success as `info["success"]`.

    `info["success"]` is the env's `success_key` (default `is_success`, gymnasium-robotics'
    convention); `info["score"]` is `score_key` when given, else the success as 0/1. The raw
    observation of the last step stays in `raw_observation`, for experts that need it.
    """

    def __init__(
        self,
        env: gym.Env,
        adapter: AdapterConfig,
        *,
        obs_keys: tuple[str, ...] | None = None,
        success_key: str = "is_success",
        score_key: str | None = None,
    ) -> None:
        super().__init__(env)
        self.adapter = adapter
        self.success_key, self.score_key = success_key, score_key
        self._sources = self._source_spaces(env.observation_space, adapter.kind)
        mapping = adapter.mapping(self._sources)
        if obs_keys is not None:
            unknown = [k for k in obs_keys if k not in mapping]
            if unknown:
                raise ValueError(
                    f"`obs_keys` {unknown} are not keys of the adapter; it gives "
                    f"{sorted(mapping)} (set `adapter.keys` to add keys)."
                )
            mapping = {k: mapping[k] for k in obs_keys}
        self._mapping = mapping
        self.observation_space = spaces.Dict(
            {key: self._key_space(key, names) for key, names in mapping.items()}
        )
        self.raw_observation: Any = None

    @staticmethod
    def _source_spaces(space: spaces.Space, kind: str) -> dict[str, spaces.Space]:
        if isinstance(space, spaces.Dict):
            if kind in ("box", "pixels"):
                raise ValueError(
                    f"`adapter.kind` {kind!r} needs a single Box observation; the env gives a "
                    f"Dict of {sorted(space.spaces)} (use kind 'dict' or 'goal')."
                )
            return dict(space.spaces)
        if isinstance(space, spaces.Box):
            if kind in ("dict", "goal"):
                raise ValueError(
                    f"`adapter.kind` {kind!r} needs a Dict observation; the env gives a Box of "
                    f"shape {space.shape} (use kind 'box', or 'pixels' for an image)."
                )
            return {WHOLE: space}
        raise ValueError(
            f"the env's observation space {space} is neither a Box nor a Dict; the adapter maps "
            "only those."
        )

    def _key_space(self, key: str, names: list[str]) -> spaces.Box:
        missing = [n for n in names if n not in self._sources]
        if missing:
            raise ValueError(
                f"`adapter.keys.{key}` names {missing}, which the observation does not have; it "
                f"has {sorted(self._sources)}."
            )
        parts = [self._sources[n] for n in names]
        if any(_is_image(p) for p in parts):
            if len(parts) != 1:
                raise ValueError(
                    f"`adapter.keys.{key}`: an image source cannot be concatenated with others "
                    f"({names})."
                )
            h, w, c = parts[0].shape
            side = self.adapter.image_size
            return spaces.Box(0, 255, (side, side, c) if side else (h, w, c), np.uint8)
        bad = [n for n, p in zip(names, parts, strict=True) if not isinstance(p, spaces.Box)]
        if bad:
            raise ValueError(f"`adapter.keys.{key}`: sources {bad} are not Boxes.")
        low = np.concatenate([np.broadcast_to(p.low, p.shape).ravel() for p in parts])
        high = np.concatenate([np.broadcast_to(p.high, p.shape).ravel() for p in parts])
        return spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)

    def observation(self, raw: Any) -> dict[str, np.ndarray]:
        sources = raw if isinstance(raw, Mapping) else {WHOLE: raw}
        out = {}
        for key, names in self._mapping.items():
            space = self.observation_space[key]
            if space.dtype == np.uint8:
                out[key] = _resize(np.asarray(sources[names[0]], np.uint8), space.shape[:2])
            else:
                flat = [np.asarray(sources[n], np.float32).ravel() for n in names]
                out[key] = np.concatenate(flat)
        return out

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        success = bool(info.get(self.success_key, False))
        score = float(info[self.score_key]) if self.score_key in info else float(success)
        return {**info, "success": success, "score": score}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        raw, info = self.env.reset(seed=seed, options=options)
        self.raw_observation = raw
        return self.observation(raw), self._info(info)

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        raw, reward, terminated, truncated, info = self.env.step(action)
        self.raw_observation = raw
        return self.observation(raw), float(reward), terminated, truncated, self._info(info)


def _resize(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-pixel resize (H, W, C) -> size: no interpolation library needed."""
    h, w = image.shape[:2]
    if (h, w) == tuple(size):
        return image
    rows = (np.arange(size[0]) * h // size[0]).clip(0, h - 1)
    cols = (np.arange(size[1]) * w // size[1]).clip(0, w - 1)
    return image[rows][:, cols]


@dataclass(frozen=True)
class ExternalTask:
    """A third-party env as a task: the `external:` block of a task preset.

    `imports`: modules imported before `gym.make` (their import registers `env_id`).
    `max_episode_steps`: None keeps the env's registered limit. `expert`: "module:Class" of a
    scripted expert configured by "module:ClassConfig" (`expert_config` its defaults); empty:
    the task has no expert, so `collect` refuses it.
    """

    env_id: str
    imports: tuple[str, ...] = ()
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    adapter: AdapterConfig = field(default_factory=AdapterConfig)
    expert: str = ""
    expert_config: dict[str, Any] = field(default_factory=dict)
    success_key: str = "is_success"
    score_key: str | None = None
    about: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"`external.env_id` must name a gymnasium id. Got {self.env_id!r}.")
        if self.expert and ":" not in self.expert:
            raise ValueError(f"`external.expert` must be 'module:Class'. Got {self.expert!r}.")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(
                f"`external.max_episode_steps` must be >= 1. Got {self.max_episode_steps}."
            )

    @classmethod
    def from_dict(cls, tree: Mapping[str, Any]) -> ExternalTask:
        """The block as written in a preset; unknown fields are named with the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(tree) - known)
        if unknown:
            raise ValueError(f"unknown `external` field(s) {unknown}. Known: {sorted(known)}.")
        if "env_id" not in tree:
            raise ValueError("`external.env_id` is required: the gymnasium id of the env.")
        values = dict(tree)
        adapter = values.get("adapter", {})
        if isinstance(adapter, Mapping):
            known_adapter = {f.name for f in fields(AdapterConfig)}
            extra = sorted(set(adapter) - known_adapter)
            if extra:
                raise ValueError(
                    f"unknown `external.adapter` field(s) {extra}. Known: {sorted(known_adapter)}."
                )
            values["adapter"] = AdapterConfig(**adapter)
        values["imports"] = tuple(values.get("imports", ()))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as datasets and checkpoints record it."""
        tree = asdict(self)
        tree["imports"] = list(self.imports)
        return tree

    def import_modules(self) -> None:
        for module in self.imports:
            try:
                with printed_as_warning(module):
                    import_preset_module(module, "external.imports")
            except ImportError as e:
                raise ImportError(
                    f"external task {self.env_id}: `imports` names {module!r}, which does not "
                    f"import ({e}). Install the package that provides it (robocompose's "
                    "`external` extra has gymnasium-robotics, gym-pusht and robosuite's needs)."
                ) from e


EXPERT_METHODS = ("reset", "act")  # reset(env, rng) at each episode's start; act(env) -> action


def import_preset_module(module: str, key: str) -> ModuleType:
    """The module a preset's `key` names: installed, or a file in the current folder (the
    `robocompose` command, unlike `python -m`, does not search it by itself)."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.append(here)  # last: an installed module of the same name wins
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise  # the module was found; something it imports is missing
        raise ModuleNotFoundError(
            f"`{key}` names module {module!r}: neither installed nor a file "
            f"{module.replace('.', '/')}.py in the current folder {here}. Run from the folder "
            "that holds it, or add that folder to PYTHONPATH.",
            name=e.name,
        ) from None


def load_expert(path: str, config: Mapping[str, Any]) -> Any:
    """The scripted expert "module:Class", built as `Class(ClassConfig(**config))`; an expert
    lacking its config class or a method of the interface is refused, naming what is missing."""
    module_name, _, cls_name = path.partition(":")
    try:
        module = import_preset_module(module_name, "external.expert")
    except ModuleNotFoundError as e:
        raise ValueError(str(e)) from None
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type):
        raise ValueError(f"expert {path!r}: module {module_name} has no class {cls_name!r}.")
    missing = [m for m in EXPERT_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(
            f"expert {path!r} lacks {' and '.join(missing)}: an expert defines reset(env, rng) "
            "(each episode's start) and act(env) -> action."
        )
    config_cls = getattr(module, f"{cls_name}Config", None)
    if config_cls is None:
        raise ValueError(
            f"expert {path!r}: module {module_name} has no {cls_name}Config, the dataclass "
            "`expert_config` fills (an empty `@dataclass class "
            f"{cls_name}Config: pass` takes no settings)."
        )
    try:
        settings = config_cls(**config)
    except TypeError as e:
        raise ValueError(
            f"expert {path!r}: `expert_config` {dict(config)} does not fit ({e})."
        ) from None
    return cls(settings)


def make_external_env(
    external: Mapping[str, Any],
    obs_keys: tuple[str, ...] | list[str] | None = None,
    image_size: int | None = None,
    render_mode: str | None = None,
) -> gym.Env:
    """The gymnasium entry point of an external task: the third-party env, adapted.

    `image_size` overrides the adapter's (as `collect image_size=` does for suite tasks)."""
    task = ExternalTask.from_dict(external)
    task.import_modules()
    kwargs = dict(task.env_kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if task.env_id not in gym.registry:
        raise ValueError(
            f"external task: env id {task.env_id!r} is not registered after importing "
            f"{list(task.imports)}; list the module that registers it under `external.imports`."
        )
    inner = gym.make(task.env_id, **kwargs)
    adapter = task.adapter
    if image_size is not None:
        adapter = AdapterConfig(adapter.kind, dict(adapter.keys), int(image_size))
    return ObservationAdapter(
        inner,
        adapter,
        obs_keys=tuple(obs_keys) if obs_keys is not None else None,
        success_key=task.success_key,
        score_key=task.score_key,
    )
