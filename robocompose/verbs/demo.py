"""The main job: compose two shipped parents on a MuJoCo task and search the composition.

1. load the task's shipped parent pair (on Stack, the default: a diffusion and a flow policy
   trained on disjoint halves of the demos),
2. evaluate each alone on one seed list,
3. search on the same seeds (successive halving by default) one pool of the convex (GPC)
   weights, the product of experts (AND, w = (1, 1)), each parent sharpened (w = (2, 0) and
   (0, 2)) and each parent alone on its own sampler,
4. evaluate the product of experts on every seed unless the search chose it (halving may have
   pruned it early; its episodes are the search's, read back),
5. print the table, save the search plot, a JSON record, and a video of the chosen candidate.

Every episode is written as it finishes under `out/`, so rerunning resumes.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from robocompose.choices import check_choices, one_of
from robocompose.composition.methods import method_title
from robocompose.composition.weight_search import (
    METHODS,
    Composed,
    Key,
    NativeParent,
    SearchSettings,
)
from robocompose.devices import check_device
from robocompose.shipped import parent_pair

EVAL_SEED_START = 100_000  # far from the demonstration seeds (0, 1, ...)


@dataclass
class DemoConfig:
    task: str = "Stack"
    episodes: int = 100
    method: str = one_of(METHODS, SearchSettings.method)
    first_slice: int = SearchSettings.first_slice
    out: str = "runs/demo"
    num_envs: int = 10
    device: str = "auto"  # auto (CUDA if present), cpu, cuda, cuda:N or mps
    # per-episode inference: every row's episodes are the same whatever num_envs
    # (docs/train-evaluate-compose.md, "One evaluation path, paired comparisons")
    batch_invariant: bool = True

    def __post_init__(self) -> None:
        check_device(self.device)
        check_choices(self)


def run(config: DemoConfig) -> dict:
    from robocompose.composition.api import chosen_policy, compose, load, search
    from robocompose.composition.search_plot import plot_search
    from robocompose.evaluation import evaluate
    from robocompose.records import rate_of

    start = time.perf_counter()
    out = Path(config.out) / config.task
    seeds = list(range(EVAL_SEED_START, EVAL_SEED_START + config.episodes))
    paths = parent_pair(config.task)
    names = [p.name for p in paths]
    parents = [load(p) for p in paths]
    settings = {
        "num_envs": config.num_envs,
        "device": config.device,
        "batch_invariant": config.batch_invariant,
    }

    rows = []
    for i, (name, parent) in enumerate(zip(names, parents, strict=True)):
        print(f"evaluating parent {name} on {len(seeds)} seeds ...", flush=True)
        native = NativeParent(i, len(parents)).label  # the search's file for it: reused there
        result = evaluate(
            parent,
            seeds,
            out=out / "episodes" / f"{native}.jsonl",
            label=native,
            **settings,
        )
        rows.append({"label": name, **result.row()})

    print(
        f"searching convex weights, product of experts and sharpened sums ({config.method}) on "
        "the same seeds ...",
        flush=True,
    )
    found = search(
        paths,
        seeds,
        out_dir=out,
        method=config.method,
        first_slice=config.first_slice,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
    )
    chosen = next(c for c in found.candidates if c.key == found.choice)
    rows.append({"label": f"{_short(found.choice, names)}, searched", **chosen.row()})

    product = Composed("weighted_sum", (1.0, 1.0))
    if found.choice != product:
        print("evaluating the product of experts on every seed ...", flush=True)
        result = evaluate(
            compose(parents, product.operator, product.weights),
            seeds,
            out=out / "episodes" / f"{product.label}.jsonl",  # the search's: its episodes reused
            label=product.label,
            **settings,
        )
        rows.append({"label": _short(product, names), **result.row()})

    plot = plot_search(
        found, out / "search.png", rows[:2], title=f"{config.task}: {names[0]} + {names[1]}"
    )
    video_seed = seeds[0]
    filmed = evaluate(
        chosen_policy(parents, found.choice),
        [video_seed],
        # one file per candidate: a rerun whose search chose another (new seeds, a new version)
        # films it instead of refusing the last winner's episode
        out=out / "video_episodes" / f"{found.choice.label}.jsonl",
        label="chosen",
        video_seeds=[video_seed],
        video_dir=out / "videos",
        progress=False,
        device=config.device,
    )

    print()
    print(f"## {config.task}: composition of {names[0]} and {names[1]}")
    print("| policy | success [95% CI] | episodes | mean score |\n|---|---|---|---|")
    for r in rows:
        rate = rate_of(r).format(episodes=False)
        print(f"| {r['label']} | {rate} | {r['episodes']} | {r['mean_score']:.3f} |")
    best_parent = max(rows[:2], key=lambda r: r["success"])
    for r in rows[2:]:
        delta = 100 * (r["success"] - best_parent["success"])
        print(f"{r['label']} - best parent: {delta:+.1f} points")
    print(
        "(all on the same seeds; the search chose its candidate on them too, which flatters it: "
        "benchmarks/composition.py --parts quality reruns on fresh seeds)"
    )
    print(f"\nthe search's choice ({found.chosen_kind}): {found.chosen_text(names)}")
    print(f"search ({found.method}) spent {found.episodes_spent} episodes; candidates:")
    print(found.table())
    record = {
        "config": asdict(config),
        "rows": rows,
        "search": found.to_dict(),
        "won": found.chosen_kind,
        "plot": str(plot),
        # the file this run wrote (`seed_N-2.mp4` if `seed_N.mp4` was there already)
        "video": str(filmed.videos[0]) if filmed.videos else None,
        "seconds": time.perf_counter() - start,
    }
    (out / "demo.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nplot: {plot}\nvideo: {record['video']}\nrecord: {out / 'demo.json'}")
    print(f"took {record['seconds']:.0f} s")
    return record


def _short(key: Key, names: list[str]) -> str:
    """A table row's name for a candidate: "GPC convex (0.3, 0.7)", "product of experts (1, 1)",
    "Stack_flow_mlp alone"."""
    if isinstance(key, NativeParent):
        return f"{names[key.index]} alone"
    return f"{method_title(key.operator)} (" + ", ".join(f"{w:g}" for w in key.weights) + ")"
