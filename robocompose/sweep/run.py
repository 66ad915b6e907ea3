"""The sweep engine behind `robocompose sweep` (`robocompose.verbs.sweep`): run the planned
cells' episodes not yet in the table, summarise.

    <sweep.dir>/episodes.csv   one row per episode: axis values, episode seed, outcome
    <sweep.dir>/summary.md     task, parents, shared settings, seeds; then per cell: mean
                               success, Wilson 95% CI, episodes, mean score
    <sweep.dir>/plots/<axis>.png
    <sweep.dir>/sweep.json     the axes and the fixed config; a rerun must match them

Rerunning the same command skips every finished cell and episode; raising `episodes` adds
episodes to every cell on the same seed lists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from robocompose.composition.config import LATER_FIELDS
from robocompose.config import ConfigError
from robocompose.interrupt import ResumableInterrupt, interrupt_deferred
from robocompose.launch.episodes import EpisodeJob
from robocompose.launch.launchers import Task, launch, tasks_of
from robocompose.sweep.config import Cell, SweepConfig, SweepPlan
from robocompose.sweep.describe import plot_context, summary_header
from robocompose.sweep.table import EpisodeTable, plot_axes, summary


@dataclass
class SweepReport:
    table: Path
    summary: str
    plots: list[Path]
    rows: int  # episodes of the planned cells and seeds in the table
    ran: int  # episodes run by this call


def _check_parents(sweep_plan: SweepPlan) -> None:
    """Every parent checkpoint exists, before anything runs; the error names the missing ones."""
    paths = dict.fromkeys(p for c in sweep_plan.cells for p in c.job.parent_paths())
    missing = [str(p) for p in paths if not (p / "config.json").is_file()]
    if missing:
        how = sweep_plan.base.sweep.requires
        hint = f" Make them with `{how}`." if how else ""
        raise FileNotFoundError(f"missing parent checkpoints: {', '.join(missing)}.{hint}")


def _applicable(sweep_plan: SweepPlan) -> tuple[list[int], dict[tuple[str, ...], str]]:
    """Cells whose policy builds; a parameter merge of parents that cannot merge (e.g. two
    architectures) is skipped with its reason, any other failure stops the sweep."""
    ok, skipped = [], {}
    for i, cell in enumerate(sweep_plan.cells):
        try:
            cell.job.policy()
        except ValueError as e:
            if not cell.job.composition.method().merges_parameters:
                raise ValueError(f"sweep cell {cell.name(sweep_plan.axes)}: {e}") from None
            skipped[cell.values] = str(e)
            continue
        ok.append(i)
    return ok, skipped


def _check_manifest(path: Path, sweep_plan: SweepPlan) -> None:
    """The folder's first run writes its axes and fixed config; a later run must match them."""
    manifest = {"axes": sweep_plan.axes, "config": sweep_plan.fixed()}
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        return
    saved, now = _flat(json.loads(path.read_text())), _flat(manifest)
    # a composition field added after the folder was written held its default there
    later = {f"config.composition.{k}": v for k, v in LATER_FIELDS.items()}
    differ = sorted(
        k
        for k in saved.keys() | now.keys()
        if saved.get(k, later.get(k)) != now.get(k, later.get(k))
    )
    if differ:
        raise ConfigError(
            f"{path.parent} holds a sweep with another config (differs in {', '.join(differ)}); "
            "rerun with its config or set another sweep.dir (or sweep.name)."
        )


def _flat(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in tree.items():
        if isinstance(v, dict) and v:
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _key(row: dict[str, str], axes: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """(cell values, episode seed): what makes a row unique."""
    return tuple(row[a] for a in axes), int(row["episode_seed"])


def _cell_job(job: SweepConfig) -> EpisodeJob:
    """A cell's episodes as a launcher's job: its composition, evaluated on one torch thread
    (evaluate's default), so parallel tasks share the cores and a result does not depend on
    the thread count."""
    settings = {
        "steps": job.composition.steps,
        "label": job.label(),
        "num_envs": job.num_envs,
        "device": job.device,
        "batch_invariant": job.batch_invariant,
    }
    return EpisodeJob(job, settings)


def _tasks(
    cells: Sequence[Cell], axes: Sequence[str], todo: dict[int, list[int]], per_task: int
) -> list[Task]:
    return [
        task
        for i, seeds in todo.items()
        for task in tasks_of(i, cells[i].name(axes), _cell_job(cells[i].job), seeds, per_task)
    ]


def run_sweep(sweep_plan: SweepPlan, progress: bool = True) -> SweepReport:
    """Run (or resume) the planned sweep (`robocompose.sweep.config.plan(overrides)`) and write
    its table, summary and plots."""
    base, axes, cells = sweep_plan.base, sweep_plan.axes, sweep_plan.cells
    folder = Path(base.sweep.dir)
    _check_parents(sweep_plan)
    applicable, skipped = _applicable(sweep_plan)
    table = EpisodeTable(folder / "episodes.csv", axes)
    done = {_key(r, axes) for r in table.read()}
    _check_manifest(folder / "sweep.json", sweep_plan)

    todo = {}
    for i in applicable:
        seeds = [s for s in cells[i].job.seeds() if (cells[i].values, s) not in done]
        if seeds:
            todo[i] = seeds
    tasks = _tasks(cells, axes, todo, base.launcher.episodes_per_task)
    total = sum(len(cells[i].job.seeds()) for i in applicable)
    remaining = sum(len(s) for s in todo.values())
    bar = tqdm(
        total=total,
        initial=total - remaining,
        desc=f"sweep {base.sweep.name}",
        unit="ep",
        disable=not progress,
    )
    ran = 0
    try:
        for task, records in launch(base.launcher, tasks):
            values = dict(zip(axes, cells[task.index].values, strict=True))
            with interrupt_deferred():  # rows on disk and counted, or neither
                table.append({**r, **values, "episode_seed": r["seed"]} for r in records)
                ran += len(records)
            bar.update(len(records))
    except KeyboardInterrupt:
        raise ResumableInterrupt(total - remaining + ran, table.path) from None
    finally:
        bar.close()

    wanted = {(cells[i].values, s) for i in applicable for s in cells[i].job.seeds()}
    rows = [r for r in table.read() if _key(r, axes) in wanted]
    text = f"{summary_header(sweep_plan)}\n\n{summary(rows, axes, skipped)}"
    (folder / "summary.md").write_text(text + "\n")
    plots = plot_axes(rows, axes, folder / "plots", plot_context(sweep_plan))
    return SweepReport(table.path, text, plots, len(rows), ran)
