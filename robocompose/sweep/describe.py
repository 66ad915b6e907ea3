"""What a sweep compared, in words: the header of summary.md and the first line of its plots.

A table of cells means little without the task, the parents, what every cell shared and which
seeds they ran; those come from the planned cells, so a setting is "fixed" only if every cell
has it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from robocompose.composition.config import CompositionConfig
from robocompose.sweep.config import SweepConfig, SweepPlan

# composition fields always named when every cell shares them; any other only when it is not
# CompositionConfig's default
SHOWN = ("operator", "weights", "sampler", "steps", "grid")


VARIES = object()


def _same(jobs: Sequence[SweepConfig], value: Callable[[SweepConfig], Any]) -> Any:
    """The value every job has, else VARIES."""
    seen = {json.dumps(value(job), sort_keys=True, default=str) for job in jobs}
    return value(jobs[0]) if len(seen) == 1 else VARIES


def parent_names(job: SweepConfig) -> str:
    return ", ".join(f"{chr(ord('A') + i)} = {p.name}" for i, p in enumerate(job.parent_paths()))


def _parents(jobs: Sequence[SweepConfig]) -> str:
    pairs = list(dict.fromkeys(parent_names(job) for job in jobs))
    return pairs[0] if len(pairs) == 1 else "per cell: " + "; ".join(f"({p})" for p in pairs)


def _fixed(jobs: Sequence[SweepConfig]) -> list[str]:
    defaults = CompositionConfig()
    out = []
    for f in dataclasses.fields(CompositionConfig):
        if f.name == "steps":  # as run: unset steps mean the operator's default
            steps = _same(jobs, lambda job: job.composition.denoising_steps())
            if steps is not VARIES:
                unset = all(job.composition.steps is None for job in jobs)
                out.append(f"composition.steps={steps}" + (" (default)" if unset else ""))
            continue
        value = _same(jobs, lambda job, name=f.name: getattr(job.composition, name))
        if value is VARIES or (f.name not in SHOWN and value == getattr(defaults, f.name)):
            continue
        out.append(f"composition.{f.name}={value}")
    batch = _same(jobs, lambda job: job.batch_invariant)
    if batch is not VARIES:
        out.append(f"batch_invariant={batch}")
    return out


def _span(seeds: Sequence[int]) -> str:
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ", ".join(map(str, seeds))


def _seeds(jobs: Sequence[SweepConfig]) -> str:
    blocks = dict.fromkeys((job.seed, tuple(job.seeds())) for job in jobs)
    counts = {len(seeds) for _, seeds in blocks}
    each = f"{counts.pop()} episodes per cell" if len(counts) == 1 else "episodes per cell vary"
    if len({seeds for _, seeds in blocks}) == 1:
        return f"{_span(next(iter(blocks))[1])} in every cell ({each})"
    return f"{each}: " + ", ".join(f"{_span(seeds)} (seed={s})" for s, seeds in blocks)


def summary_header(sweep_plan: SweepPlan) -> str:
    """Markdown lines naming the task, the parents, the axes, the shared settings, the seeds."""
    jobs = [cell.job for cell in sweep_plan.cells]
    tasks = ", ".join(dict.fromkeys(job.task.name for job in jobs))
    values = {
        a: len({c.values[i] for c in sweep_plan.cells}) for i, a in enumerate(sweep_plan.axes)
    }
    axes = ", ".join(f"{a} ({n} values)" for a, n in values.items())
    fixed = _fixed(jobs)
    return "\n".join(
        [
            f"## sweep `{sweep_plan.base.sweep.name}` on {tasks}",
            "",
            f"- parents: {_parents(jobs)}",
            f"- axes: {axes}",
            f"- fixed: {', '.join(fixed) if fixed else 'nothing else'}",
            f"- seeds: {_seeds(jobs)}",
        ]
    )


def plot_context(sweep_plan: SweepPlan) -> str:
    """One line for the plots: the task and the parents."""
    jobs = [cell.job for cell in sweep_plan.cells]
    tasks = ", ".join(dict.fromkeys(job.task.name for job in jobs))
    return f"{tasks}: {_parents(jobs)}"
