"""A training run's TensorBoard curves as one PNG, no server needed (`robocompose report RUN`).

One panel per scalar: the loss on a log axis, the learning rate, the gradient norm, the speed,
and the evaluation success with its Wilson 95% band when the run evaluated as it trained.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from robocompose.policies.train_config import EVENTS_DIR

EVENT_FILES = "events.out.tfevents.*"
BAND_TAGS = ("eval/success_ci_low", "eval/success_ci_high", "eval/episodes")
LOG_AXIS_TAGS = ("train/loss",)
PANEL_COLUMNS = 2

Curve = tuple[list[int], list[float]]


def write_report(run: Path, out: Path | None = None) -> Path:
    """Plot every scalar of the run's events into one PNG (default `run`/curves.png); returns
    its path."""
    curves = read_scalars(run)
    out = out or run / "curves.png"
    plot_curves(curves, out, title=_title(run))
    return out


def events_folder(run: Path) -> Path:
    """The run's events folder; the folder itself when handed the events folder directly."""
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: no such folder (expected a `robocompose train` out).")
    for folder in (run / EVENTS_DIR, run):
        if any(folder.glob(EVENT_FILES)):
            return folder
    raise ValueError(
        f"{run}: no TensorBoard event files (looked in {run / EVENTS_DIR}/ and {run}/). The run "
        "predates training curves, or it is not a training run (`robocompose train` writes "
        f"them to <out>/{EVENTS_DIR}/)."
    )


def read_scalars(run: Path) -> dict[str, Curve]:
    """{tag: (steps, values)} of every scalar; steps a resumed run redid are read once.

    The files are read in the order they were written, each run's file dropping the earlier
    files' steps from its purge step on (the step it resumed after, which its writer records):
    TensorBoard's own reader orders the files by name, where a process's tenth writer
    ("...pid.10") sorts before its ninth, and then keeps the wrong steps."""
    from tensorboard.backend.event_processing.event_accumulator import (
        SCALARS,
        EventAccumulator,
    )

    curves: dict[str, dict[int, float]] = {}
    for path in sorted(events_folder(run).glob(EVENT_FILES), key=_written_order):
        accumulator = EventAccumulator(str(path), size_guidance={SCALARS: 0})
        accumulator.Reload()
        events = {tag: accumulator.Scalars(tag) for tag in accumulator.Tags()[SCALARS]}
        steps = [e.step for tag_events in events.values() for e in tag_events]
        purge = _purge_step(path, default=min(steps, default=None))
        if purge is None:
            continue
        for tag in curves:
            curves[tag] = {s: v for s, v in curves[tag].items() if s < purge}
        for tag, tag_events in events.items():
            curves[tag] = curves.get(tag, {}) | {e.step: e.value for e in tag_events}
    curves = {tag: curve for tag, curve in curves.items() if curve}
    if not curves:
        raise ValueError(f"{run}: its event files hold no scalars yet (no step logged so far).")
    return {tag: (sorted(c), [c[s] for s in sorted(c)]) for tag, c in curves.items()}


def _purge_step(path: Path, default: int | None) -> int | None:
    """The step a writer opened with `purge_step` records (a session-start event), else
    `default`."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.proto.event_pb2 import SessionLog

    for event in EventFileLoader(str(path)).Load():
        if event.HasField("session_log") and event.session_log.status == SessionLog.START:
            return event.step
    return default


def _written_order(path: Path) -> tuple[int, ...]:
    """events.out.tfevents.<seconds>.<host>.<pid>.<writer>: (seconds, pid, writer) as numbers."""
    parts = path.name.split(".")
    seconds, pid, writer = parts[3], parts[-2], parts[-1]
    return tuple(int(p) if p.isdigit() else 0 for p in (seconds, pid, writer))


def plot_curves(curves: dict[str, Curve], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tags = [t for t in curves if t not in BAND_TAGS]
    rows = math.ceil(len(tags) / PANEL_COLUMNS)
    fig, axes = plt.subplots(rows, PANEL_COLUMNS, figsize=(11, 3.2 * rows), squeeze=False)
    for ax, tag in zip(axes.flat, tags, strict=False):
        steps, values = curves[tag]
        ax.plot(steps, values, marker="." if len(steps) < 30 else None)
        ax.set_title(tag)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if tag in LOG_AXIS_TAGS and all(v > 0 for v in values):
            ax.set_yscale("log")
        if tag == "eval/success":
            _success_band(ax, curves)
    for ax in axes.flat[len(tags) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _success_band(ax, curves: dict[str, Curve]) -> None:
    """The Wilson 95% interval around the success curve, and the episode count in the title."""
    if "eval/success_ci_low" in curves and "eval/success_ci_high" in curves:
        low, high = curves["eval/success_ci_low"], curves["eval/success_ci_high"]
        ax.fill_between(low[0], low[1], high[1], alpha=0.25, label="Wilson 95% interval")
        ax.legend(loc="lower right")
    if "eval/episodes" in curves:
        ax.set_title(f"eval/success (n={int(curves['eval/episodes'][1][-1])} per point)")
    ax.set_ylim(-0.02, 1.02)


def _title(run: Path) -> str:
    """The run folder and, from its checkpoint, the task it trained on."""
    config = run / "config.json"
    try:
        task = json.loads(config.read_text())["metadata"].get("task")
    except (OSError, ValueError, KeyError):
        task = None
    return f"{run.resolve().name}: {task}" if task else run.resolve().name
