"""Tables of docs/results/ecosystem.md: LeRobot datasets and policies, Rerun recordings."""

from __future__ import annotations

from report_tables import fmt


def lerobot_io() -> str:
    rows = []
    for kind, r in fmt.read("ecosystem.json")["io"].items():
        for layout in ("lerobot", "hdf5"):
            f = r[layout]
            rows.append(
                (
                    f"{r['task']} ({kind}, {r['frames']} frames)",
                    layout,
                    f"{f['write_frames_per_s']:.0f}",
                    f"{f['read_frames_per_s']:.0f}",
                    f"{f['bytes'] / 1e6:.2f}",
                )
            )
    return fmt.table(("demos", "format", "write frames/s", "read frames/s", "MB"), rows)


def lerobot_train() -> str:
    t = fmt.read("ecosystem.json")["train"]
    rows = [
        (layout, t[layout]["fingerprint"], t[layout]["success_text"])
        for layout in ("lerobot", "hdf5")
    ]
    intro = (
        f"{t['policy']}, {t['steps']} steps on {t['demos']} {t['task']} demos; same weights: "
        f"{t['same_weights']}, lerobot - hdf5 {t['lerobot_minus_hdf5']}.\n\n"
    )
    return intro + fmt.table(("dataset format", "weights fingerprint", "success"), rows)


def chunk_latency() -> str:
    d = fmt.read("ecosystem.json")["latency"]
    rows = ((k, f"{v:.1f}") for k, v in d["chunk_ms_batch1_10_steps"].items())
    return fmt.table(("policy", "ms a chunk (batch 1, 10 steps, one thread)"), rows)


def view_cost() -> str:
    rows = [
        (
            name,
            r["episodes"],
            f"{r['eval_s_per_episode']:.2f}",
            f"{r['view_s_per_episode']:.2f}",
            f"{r['overhead_ms_per_step']:.1f}",
            f"{r['rrd_bytes_per_episode'] / 1e6:.2f}",
            r["same_outcomes_as_eval"],
        )
        for name, r in fmt.read("ecosystem.json")["view"].items()
    ]
    return fmt.table(
        (
            "policy",
            "episodes",
            "eval s / episode",
            "view s / episode",
            "recording ms a step",
            ".rrd MB / episode",
            "same outcomes as eval",
        ),
        rows,
    )


TABLES = (
    lerobot_io,
    lerobot_train,
    chunk_latency,
    view_cost,
)
