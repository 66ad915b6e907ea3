"""The rollout harness: run a policy on a gymnasium env, one episode per seed of a fixed list.

Every episode runs on exactly its seed, whatever `num_envs` is: the vector env never autoresets;
a finished slot is reset with the next seed from the queue. This is the env-level harness any
gymnasium env can use; the episode records, their files (append, resume) and their aggregation
live in `robocompose.records`. Policies of this project run through
`robocompose.evaluation.evaluate`, which adds their task, device and inference layout.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers import TimeLimit
from tqdm import tqdm

from robocompose.interrupt import ResumableInterrupt
from robocompose.records import EpisodeLog, EvalResult, stamped

__all__ = ["EvalResult", "run_episodes", "side_by_side"]

SUCCESS_KEYS = ("success", "is_success")  # robocompose / gymnasium-robotics conventions
FRAME_KEY = "robocompose_frame"  # info key carrying a rendered frame out of a sub-env
VIDEO_OPTION = "robocompose_video_seeds"  # reset option: seeds whose frames to render
DEFAULT_FPS = 10
DEFAULT_NUM_ENVS = 8

Policy = Callable[[Any], Any]


def run_episodes(
    env: str | Callable[..., gym.Env],
    policy: Policy,
    seeds: Iterable[int],
    *,
    out: str | os.PathLike[str] | None = None,
    num_envs: int | None = None,
    vectorization: Literal["sync", "async"] = "sync",
    env_kwargs: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    stop_on_success: bool = True,
    video_seeds: Iterable[int] = (),
    video_dir: str | os.PathLike[str] | None = None,
    video_views: Sequence[str] = (),
    progress: bool = True,
    env_id: str | None = None,
    policy_id: str | None = None,
    batch: str | None = None,
    on_episode: Callable[[dict[str, Any], np.ndarray], None] | None = None,
) -> EvalResult:
    """Run one episode per seed and return the per-seed records and success rate.

    Args:
        env: a registered gymnasium id, or a factory called as `env(**env_kwargs)`.
        policy: `policy(obs) -> actions (num_envs, *action_shape)`; `obs` is the batched
            observation (a dict of arrays for Dict spaces) and is never modified here. An optional
            `policy.reset(mask)` is called with the bool mask of slots starting a new episode,
            as `policy.reset(mask, seeds=...)` if it takes `seeds` (each slot's episode seed,
            so a stochastic policy can draw its noise per episode, independent of batching).
        seeds: unique episode seeds; each episode is `reset(seed=seed)` on a fresh slot.
        out: JSONL file (`robocompose.records.EpisodeLog`); seeds already in it are skipped and
            their records reused.
        num_envs: parallel slots; default min(#seeds to run, DEFAULT_NUM_ENVS).
        vectorization: "sync" steps sub-envs in this process; "async" gives each a subprocess,
            which pays only when physics or rendering dominates the step and cores are free
            (otherwise pickling and pipes make it slower than "sync"; `benchmarks/sim.py`
            measures both per task).
        max_episode_steps: time limit (overrides a registered one).
        stop_on_success: end an episode at its first reported success (robomimic's rollout).
        video_seeds: seeds (run in this call) to save as `video_dir/seed_{seed}.mp4`; an id is
            made with render_mode="rgb_array", a factory must do that itself. A video is never
            overwritten: if that file exists, the next free `seed_{seed}-2.mp4`, `-3`... is
            written instead, with a warning naming both; the record's "video" is the path written.
        video_views: what the videos show, side by side, each view scaled to the tallest one's
            height (nearest pixel): an image key of the observation (its frames as the policy
            gets them, e.g. "image") or a camera of the env (through its
            `render_camera(name)`, e.g. "top"). Empty: the env's `render()`.
        env_id: name for the records and summary; default the id or the factory's name.
        policy_id: stored in every record; resuming from an `out` file written by another
            policy_id (say, the checkpoint was retrained since) is refused with an error.
        batch: how the policy batches its inference (see `robocompose.records.batch_layout`),
            stored in every record; resuming from a file of another layout is refused too.
        on_episode: called with each episode's (stamped) record and its per-step rewards as
            the episode ends, before the record is stored (a chunk log writes its file then, so
            an episode in `out` has its file too). Episodes reused from `out` are not run.

    An episode succeeds if `info["success"]` (else `info["is_success"]`) was true at any step;
    its score is the max of `info["score"]` over the episode, else the return. A step or reset
    that raises, or yields a non-finite observation/reward, ends that episode as failed with
    `error` set, and the run continues. The last slots to finish leave others idle: idle slots
    keep replaying their last seed and their episodes are discarded (the vector env steps all
    slots together), which costs at most (num_envs - 1) episodes of compute at the tail.
    """
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"`seeds` must be non-empty and unique. Got {seeds}.")
    if num_envs is not None and num_envs < 1:
        raise ValueError(f"`num_envs` must be >= 1. Got {num_envs}.")
    if vectorization not in ("sync", "async"):
        raise ValueError(f"`vectorization` must be 'sync' or 'async'. Got {vectorization!r}.")
    record_seeds = {int(s) for s in video_seeds}
    if record_seeds - set(seeds):
        raise ValueError(
            f"`video_seeds` must be in `seeds`. Got extra {record_seeds - set(seeds)}."
        )
    if record_seeds and video_dir is None:
        raise ValueError("`video_dir` must be given with `video_seeds`.")
    video_views = tuple(video_views)
    name = env_id or _env_name(env)
    log = EpisodeLog(out, name, policy_id, batch) if out is not None else None
    done = log.read() if log is not None else {}
    records = {s: done[s] for s in seeds if s in done}
    queue = deque(s for s in seeds if s not in done)
    if not queue:
        return EvalResult.from_records(name, [records[s] for s in seeds])

    n = min(num_envs or DEFAULT_NUM_ENVS, len(queue))
    env_fn = _env_factory(
        env, dict(env_kwargs or {}), max_episode_steps, bool(record_seeds), video_views
    )
    vector_cls = SyncVectorEnv if vectorization == "sync" else AsyncVectorEnv
    envs = vector_cls([env_fn] * n, autoreset_mode=AutoresetMode.DISABLED)
    bar = tqdm(total=len(seeds), initial=len(records), desc=name, unit="ep", disable=not progress)
    try:
        with log if log is not None else contextlib.nullcontext():
            rollouts = _Rollouts(
                envs, policy, queue, name, stop_on_success, record_seeds, video_dir
            )
            for record, rewards in rollouts.run():
                record = stamped(record, policy_id, batch)
                if on_episode is not None:
                    on_episode(record, rewards)
                records[record["seed"]] = record
                if log is not None:
                    log.append(record)
                bar.update()
                bar.set_postfix_str(f"success {sum(r['success'] for r in records.values())}")
    except KeyboardInterrupt:
        if log is None:
            raise
        raise ResumableInterrupt(len(records), log.path) from None
    finally:
        bar.close()
        envs.close()
    return EvalResult.from_records(name, [records[s] for s in seeds])


class _Rollouts:
    """The slot bookkeeping of one run: which seed each slot plays and its running totals."""

    def __init__(
        self,
        envs: VectorEnv,
        policy: Policy,
        queue: deque[int],
        env_id: str,
        stop_on_success: bool,
        record_seeds: set[int],
        video_dir: str | os.PathLike[str] | None,
    ) -> None:
        self.envs, self.policy, self.queue, self.env_id = envs, policy, queue, env_id
        self.stop_on_success, self.record_seeds = stop_on_success, record_seeds
        self.video_dir = Path(video_dir) if video_dir is not None else None
        self.fps = float(envs.metadata.get("render_fps") or DEFAULT_FPS)
        n = self.n = envs.num_envs
        self.seed: list[int | None] = [None] * n  # None: idle, the slot's episodes are discarded
        self.last_seed = [0] * n
        # each step's reward: their sum is the return, their count the length
        self.rewards: list[list[float]] = [[] for _ in range(n)]
        self.score: list[float | None] = [None] * n
        self.success, self.t0 = [False] * n, [0.0] * n
        self.frames: list[list[np.ndarray]] = [[] for _ in range(n)]
        self.checked_keys = False

    def run(self) -> Iterator[tuple[dict[str, Any], np.ndarray]]:
        """Yield each episode's record and per-step rewards as it finishes, until the queue is
        empty."""
        obs, finished = self._start(np.ones(self.n, dtype=bool))
        yield from finished
        shape = getattr(self.envs.single_action_space, "shape", None)
        while any(s is not None for s in self.seed):
            actions = np.asarray(self.policy(obs))
            if shape is not None and actions.shape != (self.n, *shape):
                raise ValueError(
                    f"policy must return actions of shape {(self.n, *shape)}. Got {actions.shape}."
                )
            obs, reward, terminated, truncated, infos = self.envs.step(actions)
            ended = np.logical_or(terminated, truncated)  # idle slots must be reset too
            for i in range(self.n):
                if self.seed[i] is None:
                    continue
                self.rewards[i].append(float(reward[i]))
                error = _info(infos, "error", i)
                if error is None:
                    self._update(infos, i)
                frame = _info(infos, FRAME_KEY, i)
                if frame is not None:
                    self.frames[i].append(frame)
                if error is not None or (self.stop_on_success and self.success[i]):
                    ended[i] = True
                if ended[i]:
                    yield self._finish(i, error)
            if ended.any():
                obs, finished = self._start(ended)
                yield from finished

    def _start(self, mask: np.ndarray) -> tuple[Any, list[tuple[dict[str, Any], np.ndarray]]]:
        """Reset the masked slots on the next seeds; a reset that fails is an episode too."""
        finished, union = [], mask.copy()
        while mask.any():
            starting = []
            for i in np.flatnonzero(mask):
                if self.queue:
                    self.seed[i] = self.last_seed[i] = seed = self.queue.popleft()
                    self.rewards[i], self.score[i] = [], None
                    self.success[i], self.t0[i], self.frames[i] = False, time.perf_counter(), []
                    starting.append(seed)
                else:
                    self.seed[i] = None
            if all(s is None for s in self.seed):
                return None, finished  # the run is over: no slot left to reset
            videos = [s for s in starting if s in self.record_seeds]
            options = {"reset_mask": mask, VIDEO_OPTION: videos}
            obs, infos = self.envs.reset(seed=list(self.last_seed), options=options)
            failed = np.zeros(self.n, dtype=bool)
            for i in np.flatnonzero(mask):
                if self.seed[i] is None:
                    continue
                frame = _info(infos, FRAME_KEY, i)
                if frame is not None:
                    self.frames[i].append(frame)
                error = _info(infos, "error", i)
                if error is not None:
                    finished.append(self._finish(i, error))
                    failed[i] = True
            mask = failed
        reset = getattr(self.policy, "reset", None)
        if callable(reset):
            if "seeds" in inspect.signature(reset).parameters:
                reset(union, seeds=np.array([-1 if s is None else s for s in self.last_seed]))
            else:
                reset(union)
        return obs, finished

    def _update(self, infos: dict[str, Any], i: int) -> None:
        """Fold one healthy step's info into slot i's success and score."""
        flags = [_info(infos, key, i) for key in SUCCESS_KEYS]
        if not self.checked_keys:
            if all(flag is None for flag in flags):
                keys = sorted(
                    k
                    for k in infos
                    if not k.startswith("_") and k != FRAME_KEY and infos[f"_{k}"][i]
                )
                raise ValueError(
                    f"env {self.env_id!r} must report info['success'] or info['is_success'] at "
                    f"every step. Got info keys {keys}."
                )
            self.checked_keys = True
        flag = flags[0] if flags[0] is not None else flags[1]
        self.success[i] = self.success[i] or bool(flag)
        score = _info(infos, "score", i)
        if score is not None:
            old = self.score[i]
            self.score[i] = float(score) if old is None else max(old, float(score))

    def _finish(self, i: int, error: str | None) -> tuple[dict[str, Any], np.ndarray]:
        seed = self.seed[i]
        assert seed is not None
        video = {}
        if self.frames[i] and self.video_dir is not None:
            path = _free_path(self.video_dir / f"seed_{seed}.mp4")
            _save_video(path, self.frames[i], self.fps)
            self.frames[i], video = [], {"video": str(path)}
        score, rewards = self.score[i], self.rewards[i]
        record = {
            "env_id": self.env_id,
            "seed": seed,
            "success": error is None and self.success[i],
            "score": float(sum(rewards)) if score is None else score,
            "return": float(sum(rewards)),
            "length": len(rewards),
            "error": error,
            "elapsed_s": round(time.perf_counter() - self.t0[i], 4),
        } | video
        return record, np.asarray(rewards, dtype=np.float64)


class _Guard(gym.Wrapper):
    """Turns a crash or a non-finite value in one sub-env into a failed episode.

    A vector env re-raises a sub-env's exception for the whole batch and cannot say which
    sub-env failed, so each sub-env reports `info["error"]` with terminated=True instead, and a
    zero observation of its space. It also renders frames for video seeds (see VIDEO_OPTION),
    from `views` when given (see `run_episodes`'s `video_views`), checked here before any episode.
    """

    def __init__(self, env: gym.Env, views: Sequence[str] = ()) -> None:
        super().__init__(env)
        self._steps, self._error, self._record = 0, None, False
        self._views = tuple(views)
        self._image_keys = _image_keys(env.observation_space)
        cameras = tuple(getattr(env.unwrapped, "camera_names", ()))
        unknown = [v for v in self._views if v not in self._image_keys and v not in cameras]
        if unknown:
            raise ValueError(
                f"`video_views` {unknown} name neither an image observation key "
                f"{list(self._image_keys)} nor a camera {list(cameras)} of "
                f"{type(env.unwrapped).__name__}."
            )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        options = dict(options or {})
        self._record = seed in options.pop(VIDEO_OPTION, ())
        self._steps, self._error = 0, None
        try:
            obs, info = self.env.reset(seed=seed, options=options or None)
            self._error = _nonfinite(obs, "at reset")
        except Exception as exc:  # any sub-env failure becomes a record
            obs, info, self._error = None, {}, f"{type(exc).__name__}: {exc}"
        if self._error is not None:
            return _zeros(self.observation_space), {"error": self._error}
        return obs, self._with_frame(info, obs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._error is not None:
            return _zeros(self.observation_space), 0.0, True, False, {"error": self._error}
        self._steps += 1
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self._error = _nonfinite(obs, f"at step {self._steps}")
            if self._error is None and not np.isfinite(reward):
                self._error = f"non-finite reward {reward} at step {self._steps}"
        except Exception as exc:
            self._error = f"{type(exc).__name__}: {exc}"
        if self._error is not None:
            return _zeros(self.observation_space), 0.0, True, False, {"error": self._error}
        return obs, reward, terminated, truncated, self._with_frame(info, obs)

    def _with_frame(self, info: dict[str, Any], obs: Any) -> dict[str, Any]:
        if not self._record:
            return info
        if self._views:
            frames = [
                obs[v] if v in self._image_keys else self.env.unwrapped.render_camera(v)
                for v in self._views
            ]
            return {**info, FRAME_KEY: side_by_side(frames)}
        frame = self.env.render()
        if frame is None:
            raise RuntimeError(
                "a video seed needs render() to return an rgb array; create the env with "
                "render_mode='rgb_array'."
            )
        return {**info, FRAME_KEY: np.asarray(frame)}


def _env_factory(
    env: str | Callable[..., gym.Env],
    kwargs: dict[str, Any],
    max_episode_steps: int | None,
    render: bool,
    views: Sequence[str] = (),
) -> Callable[[], gym.Env]:
    def make() -> gym.Env:
        if isinstance(env, str):
            extra = {"render_mode": "rgb_array"} if render else {}
            inner = gym.make(env, max_episode_steps=max_episode_steps, **{**extra, **kwargs})
        else:
            inner = env(**kwargs)
            if max_episode_steps is not None:
                inner = TimeLimit(inner, max_episode_steps)
        return _Guard(inner, views)

    return make


def _image_keys(space: spaces.Space) -> tuple[str, ...]:
    """The keys of a Dict observation space holding rgb images (H, W, 3) uint8."""
    if not isinstance(space, spaces.Dict):
        return ()
    return tuple(
        k
        for k, s in space.spaces.items()
        if isinstance(s, spaces.Box)
        and s.dtype == np.uint8
        and len(s.shape) == 3
        and s.shape[2] == 3
    )


def side_by_side(frames: Sequence[np.ndarray]) -> np.ndarray:
    """rgb frames left to right, each scaled (nearest pixel, aspect kept) to the tallest one's
    height: a 64 px observation stays as blocky as the policy sees it."""
    height = max(f.shape[0] for f in frames)
    scaled = []
    for frame in frames:
        h, w = frame.shape[:2]
        width = round(w * height / h)
        rows = np.arange(height) * h // height
        cols = np.arange(width) * w // width
        scaled.append(np.asarray(frame, dtype=np.uint8)[rows][:, cols])
    return np.concatenate(scaled, axis=1)


def _env_name(env: str | Callable[..., gym.Env]) -> str:
    if isinstance(env, str):
        return env
    func = getattr(env, "func", env)  # functools.partial
    return getattr(func, "__qualname__", type(func).__name__)


def _info(infos: dict[str, Any], key: str, i: int) -> Any:
    """Slot i's value of a vector-env info key, or None if slot i did not report it."""
    mask = infos.get(f"_{key}")
    return infos[key][i] if mask is not None and mask[i] else None


def _nonfinite(obs: Any, where: str, key: str = "") -> str | None:
    """Describe the first non-finite float in an observation, or None if all are finite."""
    if isinstance(obs, Mapping | tuple):
        items = obs.items() if isinstance(obs, Mapping) else enumerate(obs)
        found = (_nonfinite(v, where, f"{key}/{k}".lstrip("/")) for k, v in items)
        return next((m for m in found if m is not None), None)
    array = np.asarray(obs)
    if np.issubdtype(array.dtype, np.inexact) and not np.isfinite(array).all():
        return f"non-finite observation{f' in key {key!r}' if key else ''} {where}"
    return None


def _zeros(space: spaces.Space) -> Any:
    """A zero observation of `space`, to stand in for a failed sub-env's."""
    if isinstance(space, spaces.Dict):
        return {k: _zeros(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_zeros(s) for s in space.spaces)
    if isinstance(space, spaces.Discrete):
        return space.start
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return np.zeros(space.shape, dtype=space.dtype)
    return space.sample()


def _free_path(path: Path) -> Path:
    """`path` if no file is there, else the first free `<stem>-<n><suffix>`, with a warning:
    another run's video in the same folder is kept, never overwritten."""
    if not path.exists():
        return path
    n = 2
    while (free := path.with_name(f"{path.stem}-{n}{path.suffix}")).exists():
        n += 1
    warnings.warn(f"{path} exists (kept); this video goes to {free}", stacklevel=2)
    return free


def _save_video(path: Path, frames: list[np.ndarray], fps: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # macro_block_size=2: libx264/yuv420p needs even sides; 2 avoids rescaling small frames.
    imageio.mimwrite(
        path, [np.asarray(f, dtype=np.uint8) for f in frames], fps=fps, macro_block_size=2
    )
