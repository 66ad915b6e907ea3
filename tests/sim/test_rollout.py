"""The evaluation harness on a tiny real gymnasium env: a 1-D point that must reach x = 0."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest

from robocompose.sim.rollout import EvalResult, run_episodes

ENV_ID = "RobocomposeTestPoint-v0"
MAX_STEPS = 8
SEEDS = list(range(10))
reset_log: list[int | None] = []  # every reset of PointEnv in this process, in order


class PointEnv(gym.Env):
    """x in [-1, 1] starts at a seeded uniform draw; each step moves by 0.1 * action.

    Success (|x| < 0.05) is reported, not terminal, so `stop_on_success` decides the end.
    Starts farther than ~0.75 cannot reach within MAX_STEPS: some seeds fail honestly.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(
        self,
        render_mode: str | None = None,
        success_key: str | None = "success",
        raise_seeds: tuple[int, ...] = (),
        nan_seeds: tuple[int, ...] = (),
        fail_step: int = 3,
    ) -> None:
        self.observation_space = gym.spaces.Dict(
            {"state": gym.spaces.Box(-1.0, 1.0, (1,), np.float64)}
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float64)
        self.render_mode, self.success_key = render_mode, success_key
        self.raise_seeds, self.nan_seeds, self.fail_step = raise_seeds, nan_seeds, fail_step

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        reset_log.append(seed)
        self.seed_, self.t = seed, 0
        self.x = float(self.np_random.uniform(-1.0, 1.0))
        return self._obs(), {}

    def step(self, action: np.ndarray):
        self.t += 1
        if self.seed_ in self.raise_seeds and self.t == self.fail_step:
            raise RuntimeError(f"boom at step {self.t}")
        self.x = float(np.clip(self.x + 0.1 * np.clip(action[0], -1, 1), -1.0, 1.0))
        obs = self._obs()
        if self.seed_ in self.nan_seeds and self.t == self.fail_step:
            obs["state"][0] = np.nan
        info: dict[str, Any] = {"score": 1.0 - abs(self.x)}
        if self.success_key is not None:
            info[self.success_key] = abs(self.x) < 0.05
        return obs, -abs(self.x), False, False, info

    def render(self) -> np.ndarray:
        frame = np.zeros((16, 16, 3), dtype=np.uint8)
        frame[:, int((self.x + 1) * 7.5)] = 255
        return frame

    def _obs(self) -> dict[str, np.ndarray]:
        return {"state": np.array([self.x])}


gym.register(ENV_ID, entry_point=f"{__name__}:PointEnv", max_episode_steps=MAX_STEPS)


class GoToZero:
    """Proportional controller; counts calls and reset masks like a chunking policy would."""

    def __init__(self, interrupt_after: int | None = None) -> None:
        self.calls = self.episodes_started = 0
        self.interrupt_after = interrupt_after

    def reset(self, mask: np.ndarray) -> None:
        self.episodes_started += int(mask.sum())

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        if self.interrupt_after is not None and self.episodes_started > self.interrupt_after:
            raise KeyboardInterrupt
        self.calls += 1
        return np.clip(-20.0 * obs["state"], -1.0, 1.0)


def run(seeds: list[int] = SEEDS, **kwargs: Any) -> EvalResult:
    kwargs.setdefault("progress", False)
    return run_episodes(ENV_ID, kwargs.pop("policy", GoToZero()), seeds, **kwargs)


def by_seed(result: EvalResult) -> dict[int, tuple]:
    keys = ("success", "score", "return", "length", "error")
    return {r["seed"]: tuple(r[k] for k in keys) for r in result.records}


def read_jsonl(path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_num_envs_does_not_change_any_episode() -> None:
    one, three = run(num_envs=1), run(num_envs=3)
    assert by_seed(one) == by_seed(three)
    assert [r["seed"] for r in three.records] == SEEDS
    assert 0 < one.success.successes < len(SEEDS)  # the fixture really has both outcomes
    assert one.summary().startswith(f"{ENV_ID}: {one.success}, mean score")


def test_stop_on_success_ends_early_but_keeps_outcome() -> None:
    stop, full = run(num_envs=2), run(num_envs=2, stop_on_success=False)
    assert [r["success"] for r in stop.records] == [r["success"] for r in full.records]
    assert all(r["length"] == MAX_STEPS for r in full.records)
    assert any(r["success"] and r["length"] < MAX_STEPS for r in stop.records)


def test_resume_after_interrupt_runs_each_seed_once(tmp_path) -> None:
    out = tmp_path / "eval.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run(out=out, num_envs=1, policy=GoToZero(interrupt_after=4))
    assert [r["seed"] for r in read_jsonl(out)] == SEEDS[:4]

    reset_log.clear()
    resumed = run(out=out, num_envs=1)
    assert reset_log == SEEDS[4:]  # finished episodes are not re-run
    assert sorted(r["seed"] for r in read_jsonl(out)) == SEEDS
    assert by_seed(resumed) == by_seed(run(num_envs=2))

    policy = GoToZero()
    again = run(SEEDS[2:6], out=out, policy=policy)  # subset: nothing to run
    assert policy.calls == 0 and again.episodes == 4


def test_truncated_last_line_is_rewritten(tmp_path) -> None:
    out = tmp_path / "eval.jsonl"
    run(SEEDS[:3], out=out)
    with out.open("a") as f:
        f.write('{"env_id": "RobocomposeTestPoint-v0", "seed": 3, "succ')
    result = run(SEEDS[:5], out=out)
    lines = read_jsonl(out)  # every line parses
    assert sorted(r["seed"] for r in lines) == SEEDS[:5]
    assert by_seed(result) == by_seed(run(SEEDS[:5]))


def test_other_env_in_out_file_is_refused(tmp_path) -> None:
    out = tmp_path / "eval.jsonl"
    run(SEEDS[:1], out=out)
    with pytest.raises(ValueError, match="not 'other'"):
        run(SEEDS[:2], out=out, env_id="other")


def test_episodes_of_another_inference_layout_are_refused(tmp_path) -> None:
    out = tmp_path / "eval.jsonl"
    run(SEEDS[:2], out=out, batch="batched-3")
    assert {r["batch"] for r in read_jsonl(out)} == {"batched-3"}
    with pytest.raises(ValueError, match=r"batched-3 inference, this run uses per-episode"):
        run(SEEDS[:3], out=out, batch="per-episode")
    run(SEEDS[:1], out=tmp_path / "old.jsonl")  # no layout named, as files before "batch"
    with pytest.raises(ValueError, match=r"unrecorded \(written before records named it\)"):
        run(SEEDS[:2], out=tmp_path / "old.jsonl", batch="per-episode")


def test_episodes_of_another_policy_id_are_refused(tmp_path) -> None:
    out = tmp_path / "eval.jsonl"
    run(SEEDS[:2], out=out, policy_id="ckpt-v1")
    assert {r["policy_id"] for r in read_jsonl(out)} == {"ckpt-v1"}
    policy = GoToZero()
    run(SEEDS[:2], out=out, policy=policy, policy_id="ckpt-v1")  # same policy: resumes
    assert policy.calls == 0
    with pytest.raises(ValueError, match=r"eval\.jsonl holds episodes of policy 'ckpt-v1'"):
        run(SEEDS[:3], out=out, policy_id="ckpt-v2")


@pytest.mark.parametrize("num_envs", [1, 3])
def test_raising_and_nan_envs_fail_with_reason(num_envs: int) -> None:
    kwargs = {"raise_seeds": (2,), "nan_seeds": (5,)}
    result = run(num_envs=num_envs, env_kwargs=kwargs, stop_on_success=False)
    records = {r["seed"]: r for r in result.records}
    assert records[2]["error"] == "RuntimeError: boom at step 3"
    assert records[5]["error"] == "non-finite observation in key 'state' at step 3"
    assert not records[2]["success"] and not records[5]["success"]
    assert records[2]["length"] == records[5]["length"] == 3
    healthy = {s: v for s, v in by_seed(result).items() if s not in (2, 5)}
    clean = run(num_envs=num_envs, stop_on_success=False)
    assert healthy == {s: v for s, v in by_seed(clean).items() if s not in (2, 5)}
    assert result.errors == 2 and result.summary().endswith(", 2 errors")


def test_is_success_key_is_accepted() -> None:
    result = run(SEEDS[:4], env_kwargs={"success_key": "is_success"})
    assert by_seed(result) == by_seed(run(SEEDS[:4]))


def test_missing_success_key_names_env_and_keys() -> None:
    with pytest.raises(ValueError, match=rf"{ENV_ID}.*\['score'\]"):
        run(SEEDS[:2], env_kwargs={"success_key": None})


def test_factory_env_and_time_limit() -> None:
    result = run_episodes(PointEnv, GoToZero(), SEEDS[:3], max_episode_steps=2, progress=False)
    assert result.env_id == "PointEnv"
    assert all(r["length"] <= 2 for r in result.records)


def test_video_written_for_video_seed(tmp_path) -> None:
    result = run(SEEDS[:3], num_envs=2, video_seeds=[1], video_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["seed_1.mp4"]
    assert result.videos == [tmp_path / "seed_1.mp4"]
    assert [r.get("video") for r in result.records] == [None, str(tmp_path / "seed_1.mp4"), None]
    reader = imageio.get_reader(tmp_path / "seed_1.mp4")
    assert reader.count_frames() == result.records[1]["length"] + 1  # reset frame + one a step
    assert reader.get_meta_data()["fps"] == PointEnv.metadata["render_fps"]
    reader.close()


def test_video_of_a_second_run_in_the_same_folder_gets_a_new_name(tmp_path) -> None:
    run(SEEDS[:2], video_seeds=[1], video_dir=tmp_path)
    first = (tmp_path / "seed_1.mp4").read_bytes()
    with pytest.warns(UserWarning, match=r"seed_1\.mp4 exists \(kept\); .*seed_1-2\.mp4"):
        second = run(SEEDS[:2], video_seeds=[1], video_dir=tmp_path, out=tmp_path / "ep.jsonl")
    assert second.records[1]["video"] == str(tmp_path / "seed_1-2.mp4")  # the file written
    saved = {r["seed"]: r for r in read_jsonl(tmp_path / "ep.jsonl")}
    assert saved[1]["video"] == str(tmp_path / "seed_1-2.mp4") and "video" not in saved[0]
    with pytest.warns(UserWarning, match=r"seed_1-3\.mp4"):
        third = run(SEEDS[:2], video_seeds=[1], video_dir=tmp_path)
    assert third.videos == [tmp_path / "seed_1-3.mp4"]
    assert sorted(p.name for p in tmp_path.glob("*.mp4")) == [
        "seed_1-2.mp4",
        "seed_1-3.mp4",
        "seed_1.mp4",
    ]
    assert (tmp_path / "seed_1.mp4").read_bytes() == first


def test_async_matches_sync() -> None:
    seeds = SEEDS[:3]
    kwargs = {"raise_seeds": (1,)}
    sync = run(seeds, num_envs=2, env_kwargs=kwargs)
    assert by_seed(run(seeds, num_envs=2, env_kwargs=kwargs, vectorization="async")) == by_seed(
        sync
    )
