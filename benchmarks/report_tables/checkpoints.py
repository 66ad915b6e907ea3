"""Tables of docs/results/checkpoints.md: the shipped checkpoints and what each costs."""

from __future__ import annotations

from report_tables import fmt


def policies() -> str:
    rows = sorted(fmt.read("policies.json")["checkpoints"], key=lambda r: r["checkpoint"])
    return fmt.table(
        ("checkpoint", "success [95% CI] (episodes)", "demos", "train steps", "train min"),
        (
            (
                r["checkpoint"],
                fmt.rate(r),
                r["demos"],
                r["train_steps"],
                f"{r['train_minutes']:.1f}",
            )
            for r in rows
        ),
    )


def parent_cost() -> str:
    d = fmt.read("parent_cost.json")
    rows = (
        (
            name,
            f"{ms:.1f}",
            f"{d['encoder_ms_per_chunk'].get(name, 0):.1f}"
            if name in d["encoder_ms_per_chunk"]
            else "",
        )
        for name, ms in d["ms_per_chunk"].items()
    )
    intro = f"{d['task']}, {d['composition']}, {d['episodes']} episodes ({d['chunks']} chunks):\n\n"
    return intro + fmt.table(("parent", "ms a chunk", "of it the encoder"), rows)


def image_render() -> str:
    d = fmt.read("image_policy.json")["render"]
    rows = [("state only", "-", f"{d['state_only_step_ms']:.2f}")]
    rows += [
        (f"{r['image_size']} px image", f"{r['render_ms']:.2f}", f"{r['step_ms']:.2f}")
        for r in d["per_size"]
    ]
    return fmt.table(("observation", "render ms", "env step ms"), rows)


TABLES = (
    policies,
    parent_cost,
    image_render,
)
