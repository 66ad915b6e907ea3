"""LeRobot datasets and policies, and Rerun recordings, against the project's own paths.

    python benchmarks/ecosystem.py [--parts io,latency,view,train] [--episodes N]

Parts, each written to benchmarks/results/ecosystem.json under its name:
  io       frames/s writing and reading the same demos as robomimic hdf5 and as a LeRobot v3.0
           dataset (state: PickPlace state+proprio; image: PushT state + 96x96 camera, mp4 for
           LeRobot, gzip hdf5 chunks for ours), and the bytes each takes
  latency  one chunk (10 denoising steps, batch 1) of the LeRobot diffusion parent
           (tests/fixtures/lerobot_diffusion) next to our PickPlace parents, and composed with one
  view     seconds per episode of `evaluate` against `robocompose view`'s recording of the same
           seeds (rendering every step and writing the .rrd), and the .rrd bytes per episode
  train    the same PushT demos as hdf5 and as a LeRobot dataset, one flow MLP trained on each
           with the same seed and evaluated on the same seeds: success with Wilson intervals,
           the paired difference, and whether the weights (fingerprints) are the same
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import CHECKPOINTS, ROOT, RUNS_DIR, ResultsFile, add_parts, median_ms

from robocompose.sim.collect import run_expert_episode
from robocompose.sim.hdf5_dataset import DemoWriter, load_demos
from robocompose.sim.lerobot_dataset import LeRobotWriter
from robocompose.sim.tasks import get_task, make_env, make_expert

RESULTS = ResultsFile("ecosystem.json", writer="ecosystem.py")
PARTS = ("io", "latency", "view", "train")
FIXTURE = ROOT / "tests/fixtures/lerobot_diffusion/checkpoint"


def _demos(task: str, obs_keys: tuple[str, ...], episodes: int) -> list:
    env, expert = make_env(task, obs_keys=obs_keys), make_expert(task)
    demos, seed = [], 0
    while len(demos) < episodes:
        episode = run_expert_episode(env, expert, seed)
        if episode.success:
            demos.append(episode)
        seed += 1
    env.close()
    return demos


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def io_part(episodes: int, repeats: int = 3) -> dict:
    rows = {}
    for name, task, keys in (
        ("state", "PickPlace", ("state", "proprio")),
        ("image", "PushT", ("state", "image")),
    ):
        demos = _demos(task, keys, episodes)
        frames = sum(len(d.actions) for d in demos)
        env_id = get_task(task).env_id
        row = {"task": task, "obs_keys": list(keys), "episodes": episodes, "frames": frames}
        for fmt, writer in (("hdf5", DemoWriter), ("lerobot", LeRobotWriter)):
            write_s, read_s = [], []
            for _ in range(repeats):  # the median of `repeats` fresh writes and reads
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / ("demos.hdf5" if fmt == "hdf5" else "lerobot")
                    start = time.perf_counter()
                    with writer(path, env_id, {"obs_keys": list(keys)}) as w:
                        for d in demos:
                            w.add_episode(d.obs, d.actions, d.rewards, attrs={"seed": d.seed})
                    write_s.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    back = load_demos(path, list(keys))
                    read_s.append(time.perf_counter() - start)
                    assert sum(len(e) for e in back) == frames
                    size = _size(path)
            row[fmt] = {
                "write_frames_per_s": round(frames / float(np.median(write_s)), 1),
                "read_frames_per_s": round(frames / float(np.median(read_s)), 1),
                "bytes": size,
                "repeats": repeats,
            }
        rows[name] = row
        print(name, row, flush=True)
    return rows


def latency_part(repeats: int) -> dict:
    from robocompose.composition.api import compose
    from robocompose.policies.checkpoint import load_policy

    theirs = load_policy(FIXTURE)
    rows = {}
    obs = {
        "state": torch.randn(1, 2, theirs.config.obs_shapes["state"][0]),
        "proprio": torch.randn(1, 2, theirs.config.obs_shapes["proprio"][0]),
    }
    noise = torch.randn(1, 16, 4)
    for name in ("PickPlace_flow_mlp", "PickPlace_diffusion_unet"):
        ours = load_policy(CHECKPOINTS / name)
        rows[name] = round(median_ms(lambda p=ours: p.sample(obs, 10, noise), repeats, 5), 3)
    rows["lerobot_diffusion_fixture"] = round(
        median_ms(lambda: theirs.sample(obs, 10, noise), repeats, 5), 3
    )
    ours = load_policy(ROOT / "PickPlace_flow_mlp")
    composed = compose([ours, theirs], "convex", (0.5, 0.5), allow_normalizer_mismatch=True)
    rows["convex(PickPlace_flow_mlp, lerobot)"] = round(
        median_ms(lambda: composed.predict_actions(obs, torch.randn(1, 16, 4)), repeats, 5), 3
    )
    theirs_params = sum(p.numel() for p in theirs.parameters())
    result = {
        "chunk_ms_batch1_10_steps": rows,
        "lerobot_fixture_parameters": theirs_params,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
    }
    print(result, flush=True)
    return result


def view_part(episodes: int) -> dict:
    from robocompose.evaluation import evaluate
    from robocompose.policies.checkpoint import load_policy
    from robocompose.policies.runner import PolicyPredictor
    from robocompose.viz.episodes import record_episodes
    from robocompose.viz.recording import close_recording, open_recording

    rows = {}
    for name in ("Stack_flow_mlp", "PushT_flow_mlp"):
        policy = load_policy(CHECKPOINTS / name)
        seeds = list(range(100_000, 100_000 + episodes))
        start = time.perf_counter()
        result = evaluate(policy, seeds, progress=False, num_envs=1)
        eval_s = time.perf_counter() - start
        env_id = policy.metadata["task"]
        kwargs = dict(policy.metadata.get("env_kwargs", {}))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "view.rrd"
            start = time.perf_counter()
            stream = open_recording(path, name)
            summaries = record_episodes(stream, PolicyPredictor(policy), env_id, kwargs, seeds)
            close_recording(stream)
            view_s = time.perf_counter() - start
            size = path.stat().st_size
        same = [s.success for s in summaries] == [r["success"] for r in result.records]
        steps = sum(s.length for s in summaries)
        rows[name] = {
            "episodes": episodes,
            "steps": steps,
            "eval_s_per_episode": round(eval_s / episodes, 3),
            "view_s_per_episode": round(view_s / episodes, 3),
            "overhead_ms_per_step": round(1e3 * (view_s - eval_s) / steps, 2),
            "rrd_bytes_per_episode": size // episodes,
            "same_outcomes_as_eval": same,
        }
        print(name, rows[name], flush=True)
    return rows


def train_part(episodes: int, steps: int, eval_episodes: int, task: str = "PushT") -> dict:
    """The same demos of `task` as hdf5 and as a LeRobot folder, a flow MLP trained on each with
    seed 0, both evaluated on the same seeds: the rates with Wilson intervals and the paired
    difference. Datasets, checkpoints and episodes stay under runs/benchmarks/ecosystem/train,
    so a killed run resumes (train continues from its last checkpoint)."""
    from robocompose.evaluation import evaluate
    from robocompose.policies.checkpoint import load_policy
    from robocompose.policies.config import PolicyConfig
    from robocompose.policies.train import train
    from robocompose.policies.train_config import TrainConfig
    from robocompose.stats import paired_outcomes

    root = RUNS_DIR / "ecosystem" / "train" / f"{task}_{episodes}demos_{steps}steps"
    root.mkdir(parents=True, exist_ok=True)
    env_id = get_task(task).env_id
    paths = {"hdf5": root / "demos.hdf5", "lerobot": root / "lerobot"}
    if not (root / "demos.done").exists():
        demos = _demos(task, ("state",), episodes)
        for fmt, writer in (("hdf5", DemoWriter), ("lerobot", LeRobotWriter)):
            if paths[fmt].is_dir():  # a collection killed half way: start it again
                shutil.rmtree(paths[fmt])
            else:
                paths[fmt].unlink(missing_ok=True)
            with writer(paths[fmt], env_id, {"obs_keys": ["state"]}) as w:
                for d in demos:
                    w.add_episode(d.obs, d.actions, d.rewards, attrs={"seed": d.seed})
        (root / "demos.done").touch()
    seeds = list(range(100_000, 100_000 + eval_episodes))
    out = {}
    for fmt, path in paths.items():
        policy = PolicyConfig(family="flow", backbone="mlp")
        config = TrainConfig(
            dataset=str(path), out=str(root / f"ckpt_{fmt}"), steps=steps, policy=policy
        )
        start = time.perf_counter()
        folder = train(config, progress=False)
        minutes = (time.perf_counter() - start) / 60
        trained = load_policy(folder)
        result = evaluate(trained, seeds, progress=False, out=root / f"eval_{fmt}.jsonl")
        records = sorted(result.records, key=lambda r: r["seed"])
        out[fmt] = {
            "fingerprint": trained.fingerprint(),
            "success": result.success.rate,
            "success_text": str(result.success),
            "successes": [bool(r["success"]) for r in records],
            "train_minutes_this_run": round(minutes, 2),
        }
        print(fmt, {k: v for k, v in out[fmt].items() if k != "successes"}, flush=True)
    hdf5, lerobot = out["hdf5"]["successes"], out["lerobot"]["successes"]
    paired = paired_outcomes(lerobot, hdf5)
    return {
        "task": task,
        "policy": "flow_mlp (batch 256, seed 0, one thread)",
        "demos": episodes,
        "steps": steps,
        "eval_seeds": [seeds[0], seeds[-1]],
        "same_weights": out["hdf5"]["fingerprint"] == out["lerobot"]["fingerprint"],
        "same_outcome_episodes": sum(a == b for a, b in zip(hdf5, lerobot, strict=True)),
        "lerobot_minus_hdf5": paired.format(),
        **{fmt: {k: v for k, v in row.items() if k != "successes"} for fmt, row in out.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_parts(parser, PARTS)
    parser.add_argument("--episodes", type=int, default=50, help="demos per io dataset")
    parser.add_argument("--io-repeats", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--view-episodes", type=int, default=10)
    parser.add_argument("--train-task", default="PushT", help="results key train (train_<task>)")
    parser.add_argument("--train-demos", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=4000)
    parser.add_argument("--train-eval-episodes", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    torch.set_num_threads(1)
    np.set_printoptions(precision=3)
    if "io" in args.parts:
        RESULTS.set(["io"], io_part(args.episodes, args.io_repeats))
    if "latency" in args.parts:
        RESULTS.set(["latency"], latency_part(args.repeats))
    if "view" in args.parts:
        RESULTS.set(["view"], view_part(args.view_episodes))
    if "train" in args.parts:
        result = train_part(
            args.train_demos, args.train_steps, args.train_eval_episodes, args.train_task
        )
        key = "train" if args.train_task == "PushT" else f"train_{args.train_task}"
        RESULTS.set([key], result)
    print(f"wrote {RESULTS.path}")


if __name__ == "__main__":
    main()
