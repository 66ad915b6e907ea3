"""The skill-conditioned policies of `benchmarks/skills.py` (its parts skill_policies,
skill_policies_flow_pair and skill_language): one skill call per case on a seeded scene, by a
learned policy or a composition of two, resumable per case and spec."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import resume_records

from robocompose.hierarchical.skills.learned import registry_for
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld
from robocompose.sim.stack import STACK_XY_TOL_M
from robocompose.stats import paired_outcomes, success_rate

MINILM = "runs/skills_language/Tabletop_skills_flow_mlp_minilm"
SKILL_PARENTS = ("Tabletop_skills_diffusion_mlp", "Tabletop_skills_flow_mlp")
# the pair each skill_policies part composes: label -> checkpoint (the first is weighted first)
PAIRS: dict[str, dict[str, str]] = {
    "skill_policies": dict(zip(("diffusion", "flow"), SKILL_PARENTS, strict=True)),
    # two flow policies of one recipe, trained from different seeds
    "skill_policies_flow_pair": {
        "flow": "Tabletop_skills_flow_mlp",
        "flow_b": "Tabletop_skills_flow_mlp_b",
    },
}
SKILL_CASES = ("pick", "place_on", "place_on_stack", "place_in")
# the compositions searched per skill case: convex weights (first parent, second) and the
# product of experts
SEARCH_CANDIDATES: tuple[tuple[str, tuple[float, float]], ...] = (
    *(("convex", (w, 1 - w)) for w in (0.1, 0.3, 0.5, 0.7, 0.9)),
    ("weighted_sum", (1.0, 1.0)),
)
FRESH_SEED_START, SEARCH_SEED_START = 10_000, 20_000  # disjoint from the demos' and each other


def rate_of(records: list[dict], field: str = "success") -> dict[str, Any]:
    rate = success_rate(sum(bool(r[field]) for r in records), len(records))
    return {
        "rate": rate.rate,
        "ci95": [rate.ci_low, rate.ci_high],
        "n": rate.episodes,
        "text": str(rate),
    }


def composed_spec(
    operator: str, weights: tuple[float, float], parents: tuple[str, ...] = SKILL_PARENTS
) -> str:
    return f"learned:{'+'.join(parents)}:{operator}:{weights[0]:g},{weights[1]:g}"


def safe_name(spec: str) -> str:
    return spec.replace(":", "_").replace("+", "_").replace(",", "_")


def skill_episode(worlds: dict[str, SimWorld], spec: str, case: str, seed: int) -> dict:
    """One call of the case's skill by `spec` on a seeded scene (the same scene, arguments and
    scripted setup for every spec of a seed)."""
    world = worlds["SortBins" if case == "place_in" else "Stack"]
    world.reset(seed)
    blocks = world.objects()
    rng = np.random.default_rng((seed, 7))
    obj, other, third = (blocks[i] for i in rng.permutation(len(blocks)))
    setup_calls = {
        "pick": [],
        "place_on": [("pick", obj)],
        "place_in": [("pick", obj)],
        # the tower's second storey, as stack_three's last place meets it
        "place_on_stack": [("pick", other), ("place", other, third), ("pick", obj)],
    }
    scripted = build_registry(world)
    for call in setup_calls[case]:
        setup = scripted.call(world, *call)
        if not setup.success_check:
            return {"success": False, "setup_failed": True, "steps": 0, "error": setup.error}
    skill = "pick" if case == "pick" else "place"
    registry = registry_for(world, {skill: spec})
    args = {
        "pick": (obj,),
        "place_on": (obj, other),
        "place_on_stack": (obj, other),
        "place_in": (obj, obj[: -len("block")] + "bin"),
    }
    trace = registry.call(world, skill, *args[case])
    record = {
        "success": bool(trace.success_check),
        "setup_failed": False,
        "steps": trace.steps,
        "error": trace.error,
    }
    if case != "pick":  # how far from the target's centre it came to rest, in xy
        offset = np.subtract(world.position(obj)[:2], world.position(args[case][1])[:2])
        record["xy_error_m"] = float(np.hypot(*offset))
    return record


def skill_runs(
    worlds: dict[str, SimWorld], spec: str, case: str, seeds: list[int], out: Path
) -> list[dict]:
    return resume_records(
        out / "skill_policies" / f"{case}_{safe_name(spec)}.jsonl",
        [str(s) for s in seeds],
        lambda key: skill_episode(worlds, spec, case, int(key)),
    )


def skill_policies(
    fresh: list[int], search: list[int], out: Path, pair: dict[str, str], cases: Sequence[str]
) -> dict:
    """Per case: the composition chosen on the search seeds, then each parent of `pair` (label
    -> checkpoint) and the composition on fresh seeds."""
    worlds = {task: SimWorld(task) for task in ("Stack", "SortBins")}
    singles = {label: f"learned:{ckpt}" for label, ckpt in pair.items()}
    parents = tuple(pair.values())

    def composed(candidate: tuple[str, tuple[float, float]]) -> str:
        return composed_spec(*candidate, parents=parents)

    result: dict[str, Any] = {"pair": pair}
    for case in cases:
        grid = {
            candidate: rate_of(skill_runs(worlds, composed(candidate), case, search, out))
            for candidate in SEARCH_CANDIDATES
        }
        # ties go to the convex weights nearest (0.5, 0.5)
        best = max(
            SEARCH_CANDIDATES,
            key=lambda c: (grid[c]["rate"], c[0] == "convex", -abs(c[1][0] - 0.5)),
        )
        runs = {name: skill_runs(worlds, spec, case, fresh, out) for name, spec in singles.items()}
        runs["composed"] = skill_runs(worlds, composed(best), case, fresh, out)
        rates = {name: rate_of(r) for name, r in runs.items()}
        if case.startswith("place_on"):  # the Stack env's own tolerance, stricter than the skill's
            rates |= {
                f"{name}_within_stack_tol": rate_of(
                    [{"ok": r["success"] and r["xy_error_m"] < STACK_XY_TOL_M} for r in v], "ok"
                )
                for name, v in runs.items()
            }
        better = max(singles, key=lambda name: rates[name]["rate"])
        paired = paired_outcomes(
            [r["success"] for r in runs["composed"]], [r["success"] for r in runs[better]]
        )
        result[case] = {
            **rates,
            "search": {composed(c): grid[c] for c in SEARCH_CANDIDATES},
            "composed_operator": best[0],
            "composed_weights": list(best[1]),
            "composed_spec": composed(best),
            "better_single": better,
            "composed_minus_better": {
                "difference": paired.difference,
                "ci95": [paired.ci_low, paired.ci_high],
                "only_composed": paired.only_a,
                "only_better": paired.only_b,
            },
            "setup_failures": sum(r["setup_failed"] for r in runs["composed"]),
            "mean_steps": {n: float(np.mean([r["steps"] for r in v])) for n, v in runs.items()},
        }
    result["composition_matches_or_beats"] = sum(
        result[c]["composed"]["rate"] >= result[c][result[c]["better_single"]]["rate"]
        for c in cases
    )
    result["seeds"] = {"fresh": len(fresh), "search": len(search)}
    for world in worlds.values():
        world.close()
    return result


def skill_language(fresh: list[int], out: Path, minilm: str) -> dict:
    """Token embeddings against sentence embeddings, the flow policy, per case, paired."""
    worlds = {task: SimWorld(task) for task in ("Stack", "SortBins")}
    specs = {"tokens": f"learned:{SKILL_PARENTS[1]}", "minilm": f"learned:{minilm}"}
    result: dict[str, Any] = {"checkpoints": specs, "seeds": len(fresh)}
    for case in SKILL_CASES:
        runs = {name: skill_runs(worlds, spec, case, fresh, out) for name, spec in specs.items()}
        paired = paired_outcomes(
            [r["success"] for r in runs["minilm"]], [r["success"] for r in runs["tokens"]]
        )
        result[case] = {
            **{name: rate_of(r) for name, r in runs.items()},
            "minilm_minus_tokens": {
                "difference": paired.difference,
                "ci95": [paired.ci_low, paired.ci_high],
            },
        }
    for world in worlds.values():
        world.close()
    return result
