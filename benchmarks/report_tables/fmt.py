"""How report.py writes a figure: one helper per kind of cell, shared by every page's tables."""

from __future__ import annotations

from collections.abc import Iterable

from common import ResultsFile

from robocompose.records import rate_of


def read(name: str) -> dict:
    return ResultsFile(name).read()


def table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def rate(row: dict) -> str:
    """A saved {"success", "episodes", ...} row: "63.0% [53.2, 71.8] (100)"."""
    return f"{rate_of(row).format(episodes=False)} ({row['episodes']})"


def pct(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def spread(stats: dict, digits: int = 2) -> str:
    """A {"p50", "p99", "max"} summary as "p50 / p99 / max"."""
    return " / ".join(
        "-" if stats.get(k) is None else f"{stats[k]:.{digits}f}" for k in ("p50", "p99", "max")
    )


def points(paired: dict) -> str:
    """A paired difference as "+4.0 [-1.3, +9.3]", from whichever form the JSON stored."""
    if "formatted" in paired:
        return paired["formatted"].split(" (n=")[0].replace(" points", "")
    if "ci95" in paired:
        lo, hi = paired["ci95"]
    else:
        lo, hi = paired["ci_low"], paired["ci_high"]
    return f"{100 * paired['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def paired_cell(p: dict | None) -> str:
    """A paired difference, or "not run" for a comparison the run left out (or skipped)."""
    if not p or "skipped" in p:
        return "not run"
    return points(p)


def signed(value: float | None) -> str:
    """A share that is undefined where there is no gap to close."""
    return "-" if value is None else f"{value:+.2f}"


def weights(w: Iterable[float]) -> str:
    return "(" + ", ".join(f"{x:g}" for x in w) + ")"
