"""Tables of docs/results/setup.md and the README's demo table: what the two commands print
and cost, and the CPU paths under them."""

from __future__ import annotations

from report_tables import fmt
from robocompose.records import rate_of


def demo() -> str:
    """What `make demo` prints: the pinned CPU path's run of benchmarks/cpu_paths.py."""
    rows = fmt.read("cpu_paths.json")["demo"]["variants"]["pinned"]["rows"]
    return fmt.table(
        ("policy", "success [95% CI]", "episodes", "mean score"),
        (
            (r["label"], rate_of(r).format(episodes=False), r["episodes"], f"{r['mean_score']:.3f}")
            for r in rows
        ),
    )


def cpu_paths() -> str:
    """The demo's table with the kernel pins and with each library's widest path."""
    d = fmt.read("cpu_paths.json")["demo"]
    variants = d["variants"]
    header = (
        ["policy"]
        + [f"{name} ({v['aten_capability']})" for name, v in variants.items()]
        + ["difference (points)"]
    )
    columns = [v["rows"] for v in variants.values()]
    rows = [
        [rows[0]["label"]] + [rate_of(r).format(episodes=False) for r in rows] + [f"{diff:.1f}"]
        for *rows, diff in zip(*columns, d["success_difference_points"], strict=True)
    ]
    return f"On {d['cpu']}, {d['episodes']} episodes a row:\n\n" + fmt.table(header, rows)


def setup_runs() -> str:
    """Each fresh-clone run of benchmarks/setup_cost.py."""
    runs = fmt.read("setup.json")["runs"]

    def seconds(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    return fmt.table(
        (
            "finished",
            "commit",
            "CPU (cores)",
            "pip cache",
            "setup s",
            "make demo s",
            "make test s",
            "parallel pass s",
            "realtime pass s",
            "passed / failed / skipped",
            "venvs GB",
        ),
        (
            (
                r["finished"],
                r["commit"][:7],
                f"{r['cpu']} ({r['cores']})",
                r["pip_cache"],
                seconds(r["setup_s"]),
                seconds(r["demo_s"]),
                seconds(r["test_s"]),
                seconds(r.get("test_pass_s", {}).get("parallel")),
                seconds(r.get("test_pass_s", {}).get("realtime")),
                f"{r['tests_passed']} / {r['tests_failed']} / {r['tests_skipped']}",
                f"{r['venv_bytes_total'] / 1e9:.1f}",
            )
            for r in runs
        ),
    )


def train_threads() -> str:
    d = fmt.read("train_threads.json")["flow_mlp_pusht"]
    intro = (
        f"{d['steps']} steps of the flow MLP recipe (batch {d['batch_size']}, {d['demos']} PushT "
        f"demos), {d['cpus']} cores, load average {d['load_average_before']:.1f} before:\n\n"
    )
    rows = ((r["load"], r["torch_threads"], f"{r['seconds']:.1f}") for r in d["runs"])
    return intro + fmt.table(("other load", "torch_threads", "seconds"), rows)


def batch_invariance() -> str:
    """Per-episode against batched inference on the same 20 seeds."""
    d = fmt.read("batch_invariance.json")
    rows = []
    for name, c in d["checkpoints"].items():
        for run, r in c["runs"].items():
            rows.append(
                (
                    name,
                    run,
                    r["success"],
                    c["differ_from_per_episode_1"][run],
                    c["success_differs_from_per_episode_1"][run],
                    f"{r['seconds_per_episode']:.2f}",
                )
            )
    header = (
        "policy",
        "inference, num_envs",
        "success",
        "records changed",
        "outcomes changed",
        "s / episode",
    )
    return fmt.table(header, rows)


def batch_cost() -> str:
    """CPU time of per-episode against batched inference at num_envs 8, fastest of the rounds."""
    d = fmt.read("batch_invariance.json")
    rows = []
    for name, c in d["checkpoints"].items():
        t = c["timing_at_8"]
        per, batched = (min(r["cpu_s"] for r in t[k]) for k in ("per-episode", "batched"))
        rows.append((name, f"{per:.2f}", f"{batched:.2f}", f"{per / batched:.2f}x"))
    header = ("policy", "per-episode CPU s / episode", "batched", "per-episode / batched")
    return fmt.table(header, rows)


def cli_startup() -> str:
    d = fmt.read("cli_startup.json")
    rows = []
    for when, run in d.items():
        for command, c in run["commands"].items():
            rows.append((f"`{command}`", when, run["commit"], f"{c['median_s']:.3f}"))
    return fmt.table(("command", "run", "commit", "median s"), rows)


TABLES = (
    demo,
    cpu_paths,
    setup_runs,
    train_threads,
    batch_invariance,
    batch_cost,
    cli_startup,
)
