"""Success of every shipped checkpoint on its task: >= 200 seeded episodes, Wilson 95% CI.

Episodes go to runs/benchmarks/policies/<checkpoint>.jsonl as they finish, so a killed run
resumes. Evaluation seeds start at 100000, away from the demonstration seeds.

    python benchmarks/policies.py [--episodes 200] [--only NAME] [--train-speed-steps 500]

With --train-speed-steps N, each checkpoint's own training recipe also runs N steps afresh on one
torch thread, and `train_minutes_one_core` extrapolates that to its full step count (start-up
included, so it errs high): a shipped run's own `train_minutes` depends on what else shared
the machine then.
"""

from __future__ import annotations

import argparse
import tempfile

from common import ROOT, RUNS_DIR, ResultsFile, shipped_checkpoints

from robocompose.evaluation import evaluate
from robocompose.policies.checkpoint import read_checkpoint_config
from robocompose.policies.config import PolicyConfig
from robocompose.policies.train import TrainConfig, train

EVAL_SEED_START = 100_000
RESULTS = ResultsFile("policies.json", writer="policies.py")


def train_minutes_one_core(recipe: dict, full_steps: int, steps: int) -> float:
    """Minutes the recorded recipe needs for `full_steps`, from a fresh run of `steps`."""
    with tempfile.TemporaryDirectory() as out:
        dataset = ROOT / recipe["dataset"]  # recorded relative to the repository root
        fields = recipe | {
            "policy": PolicyConfig.from_dict(recipe["policy"]),
            "dataset": str(dataset),
            "out": out,
        }
        config = TrainConfig(**fields | {"steps": steps, "torch_threads": 1})
        folder = train(config, progress=False)
        minutes = read_checkpoint_config(folder)["metadata"]["train_minutes"]
    return minutes * full_steps / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--only", default="", help="comma-separated checkpoint names")
    parser.add_argument("--train-speed-steps", type=int, default=0, help="0: skip")
    args = parser.parse_args()
    rows = {r["checkpoint"]: r for r in RESULTS.read().get("checkpoints", [])}
    only = {s for s in args.only.split(",") if s}
    for folder in shipped_checkpoints():
        if only and folder.name not in only:
            continue
        document = read_checkpoint_config(folder)
        meta, cfg = document["metadata"], document["policy"]
        if "skill_args" in cfg["obs_keys"]:  # a skill policy: no env observes it; skills.py does
            continue
        seeds = range(EVAL_SEED_START, EVAL_SEED_START + args.episodes)
        log = RUNS_DIR / "policies" / f"{folder.name}.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        result = evaluate(folder, seeds, out=log)
        rows[folder.name] = {
            "checkpoint": folder.name,
            "task": meta["task"],
            "family": cfg["family"],
            "backbone": cfg["backbone"],
            "obs": "image"
            if any(len(cfg["obs_shapes"][k]) == 3 for k in cfg["obs_keys"])
            else "state",
            "demos": len(meta["demos"]),
            "success": result.success.rate,
            "ci_low": result.success.ci_low,
            "ci_high": result.success.ci_high,
            "episodes": result.episodes,
            "mean_score": result.mean_score,
            "train_minutes": meta["train_minutes"],
            "train_steps": meta["step"],
        }
        if args.train_speed_steps:
            rows[folder.name]["train_minutes_one_core"] = train_minutes_one_core(
                meta["train"], meta["step"], args.train_speed_steps
            )
        print(result.summary(), flush=True)
        RESULTS.write({"checkpoints": sorted(rows.values(), key=lambda r: r["checkpoint"])})


if __name__ == "__main__":
    main()
