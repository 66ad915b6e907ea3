"""`robocompose` command line: one entry point, one sub-command per verb."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from robocompose.sim.tasks import TASKS


def _collect(args: argparse.Namespace) -> None:
    from robocompose.sim.collect import collect

    expert_config = json.loads(args.expert_config) if args.expert_config else {}
    rate = collect(
        args.task,
        args.episodes,
        args.out,
        obs_keys=tuple(args.obs_keys.split(",")),
        seed_start=args.seed_start,
        expert_config=expert_config,
    )
    print(f"{args.task}: wrote {args.out}; expert success this run {rate}")


def _train(args: argparse.Namespace) -> None:
    from robocompose.overrides import config_from_overrides
    from robocompose.policies.train import TrainConfig, train

    config = config_from_overrides(TrainConfig, args.overrides)
    folder = train(config)
    print(f"checkpoint: {folder}")


def _eval(args: argparse.Namespace) -> None:
    from robocompose.policies.evaluation import evaluate_checkpoint

    seeds = range(args.seed_start, args.seed_start + args.episodes)
    video_seeds = [int(s) for s in args.video_seeds.split(",") if s]
    eval_dir = Path(args.out).parent if args.out else Path(args.checkpoint) / "eval"
    result = evaluate_checkpoint(
        args.checkpoint,
        seeds,
        out=args.out or eval_dir / "episodes.jsonl",
        steps=args.steps,
        num_envs=args.num_envs,
        video_seeds=video_seeds,
        video_dir=eval_dir / "videos" if video_seeds else None,
    )
    print(result.summary())


def _experts(args: argparse.Namespace) -> None:
    """The scripted expert on every task: a table and one video per task."""
    import imageio

    from robocompose.sim.collect import run_expert_episode
    from robocompose.sim.tasks import make_env, make_expert
    from robocompose.stats import success_rate

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in TASKS:
        env = make_env(name, render_mode="rgb_array")
        expert = make_expert(name)
        successes, scores, start = 0, [], time.perf_counter()
        for seed in range(args.episodes):
            episode = run_expert_episode(env, expert, seed, video=seed == 0)
            if seed == 0:
                video = out / f"{name}_expert_seed0.mp4"
                imageio.mimsave(video, episode.video, fps=env.metadata.get("render_fps", 10))
            successes += episode.success
            scores.append(episode.score)
        env.close()
        rate = success_rate(successes, args.episodes)
        rows.append((name, str(rate), f"{np.mean(scores):.3f}", time.perf_counter() - start))
    print("| task | expert success [95% CI] | mean score | seconds |\n|---|---|---|---|")
    for name, rate, score, seconds in rows:
        print(f"| {name} | {rate} | {score} | {seconds:.1f} |")


def _parents(args: argparse.Namespace) -> list:
    from robocompose.composition import load

    return [load(path) for path in args.checkpoints]


def _compose(args: argparse.Namespace) -> None:
    from robocompose.composition import compose, evaluate

    weights = [float(w) for w in args.weights.split(",")]
    policy = compose(_parents(args), args.operator, weights, sampler=args.sampler, steps=args.steps)
    seeds = range(args.seed_start, args.seed_start + args.episodes)
    label = f"{args.operator}_" + "_".join(f"{w:.3f}" for w in weights)
    result = evaluate(
        policy,
        seeds,
        out=Path(args.out) / f"{label}.jsonl",
        label=label,
        video_seeds=[int(s) for s in args.video_seeds.split(",") if s],
        video_dir=Path(args.out) / "videos",
    )
    print(result.summary())


def _search(args: argparse.Namespace) -> None:
    from robocompose.composition import search
    from robocompose.composition.search import plot_search

    seeds = list(range(args.seed_start, args.seed_start + args.episodes))
    result = search(
        _parents(args),
        seeds,
        out_dir=args.out,
        operator=args.operator,
        method=args.method,
        step=args.step,
    )
    print(result.table())
    print(f"chosen {result.chosen}; {result.episodes_spent} episodes spent")
    result.save(Path(args.out) / "search.json")
    if len(args.checkpoints) == 2:
        print(f"plot: {plot_search(result, Path(args.out) / 'search.png')}")


def _demo(args: argparse.Namespace) -> None:
    from robocompose.demo import DemoConfig, run_demo

    run_demo(DemoConfig(task=args.task, episodes=args.episodes, method=args.method, out=args.out))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robocompose", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)

    p = verbs.add_parser("collect", help="write expert demos to a robomimic-layout hdf5 file")
    p.add_argument("task", help=f"one of {', '.join(TASKS)}")
    p.add_argument("--episodes", type=int, required=True, help="number of successful demos")
    p.add_argument("--out", required=True, help="output .hdf5 (appended to if it exists)")
    p.add_argument("--obs-keys", default="state", help="comma-separated: state,image")
    p.add_argument("--seed-start", type=int, default=0)
    p.add_argument("--expert-config", default="", help="JSON, e.g. '{\"action_noise_m\": 0.003}'")
    p.set_defaults(func=_collect)

    p = verbs.add_parser(
        "train",
        help="train a policy: key=value overrides of TrainConfig",
        description="e.g. robocompose train dataset=data/pusht.hdf5 out=ckpt/pusht_flow "
        "policy.family=flow policy.backbone=mlp steps=5000",
    )
    p.add_argument("overrides", nargs="*", help="key=value, e.g. policy.family=flow steps=2000")
    p.set_defaults(func=_train)

    p = verbs.add_parser("eval", help="evaluate a checkpoint on its task")
    p.add_argument("checkpoint", help="checkpoint folder (config.json + model.safetensors)")
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--seed-start", type=int, default=100_000, help="first evaluation seed")
    p.add_argument("--steps", type=int, default=None, help="denoising steps (default: config)")
    p.add_argument("--num-envs", type=int, default=None)
    p.add_argument("--out", default=None, help="episodes JSONL (default: CHECKPOINT/eval/)")
    p.add_argument("--video-seeds", default="", help="comma-separated seeds to film")
    p.set_defaults(func=_eval)

    p = verbs.add_parser("compose", help="evaluate a composition of checkpoints")
    p.add_argument("checkpoints", nargs="+", help="parent checkpoint folders (>= 2)")
    p.add_argument(
        "--operator", default="convex", help="convex, weighted_sum, guided, mixture, merge"
    )
    p.add_argument("--weights", default="0.5,0.5")
    p.add_argument("--sampler", default="euler", help="euler, heun, ancestral, mcmc")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--seed-start", type=int, default=100_000)
    p.add_argument("--out", default="runs/compose")
    p.add_argument("--video-seeds", default="")
    p.set_defaults(func=_compose)

    p = verbs.add_parser("search", help="test-time search of composition weights")
    p.add_argument("checkpoints", nargs="+", help="parent checkpoint folders (>= 2)")
    p.add_argument("--operator", default="convex")
    p.add_argument("--method", default="grid", choices=["grid", "halving"])
    p.add_argument("--step", type=float, default=None, help="simplex grid step (0.1 for K=2)")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed-start", type=int, default=100_000)
    p.add_argument("--out", default="runs/search")
    p.set_defaults(func=_search)

    p = verbs.add_parser("experts", help="the scripted experts on every task, with videos")
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--out", default="runs/experts")
    p.set_defaults(func=_experts)

    p = verbs.add_parser("demo", help="the main job: compose shipped parents and search")
    p.add_argument("--task", default="PushT", help=f"one of {', '.join(TASKS)}")
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--method", default="halving", choices=["grid", "halving"])
    p.add_argument("--out", default="runs/demo")
    p.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"robocompose {args.verb}: error: {e}") from None
