"""summary.md's header names what the sweep compared: task, parents, axes, what every cell
shared, and the seeds (read off the planned cells, so nothing runs here)."""

from __future__ import annotations

from pathlib import Path

from robocompose.config import hydra_value
from robocompose.sweep.config import plan
from robocompose.sweep.describe import plot_context, summary_header


def test_header_of_an_operator_sweep_on_the_shipped_pair() -> None:
    header = summary_header(plan(["sweep=operators", "composition.sampler=heun"]))
    assert header.splitlines() == [
        "## sweep `operators` on Stack",
        "",
        "- parents: A = Stack_diffusion_mlp, B = Stack_flow_mlp",
        "- axes: composition (4 values)",
        "- fixed: composition.sampler=heun, composition.steps=10 (default), "
        "composition.grid=reference, batch_invariant=True",
        "- seeds: 100000-100049 in every cell (50 episodes per cell)",
    ]


def test_header_names_given_parents_seed_blocks_and_set_settings(flow_parents: list[Path]) -> None:
    sweep_plan = plan(
        [
            "task=PickPlace",
            f"parents={hydra_value([str(p) for p in flow_parents])}",
            "composition.weights=[0.3,0.7],[0.7,0.3]",
            "seed=0,1",
            "episodes=3",
            "composition.steps=4",
            "composition.sigma_switch=0.5",  # not a default: named
        ]
    )
    lines = summary_header(sweep_plan).splitlines()
    names = f"A = {flow_parents[0].name}, B = {flow_parents[1].name}"
    assert lines[0] == "## sweep `sweep` on PickPlace" and lines[2] == f"- parents: {names}"
    assert lines[3] == "- axes: composition.weights (2 values), seed (2 values)"
    assert lines[4] == (
        "- fixed: composition.operator=convex, composition.sampler=euler, "
        "composition.steps=4, composition.grid=reference, composition.sigma_switch=0.5, "
        "batch_invariant=True"
    )
    assert (
        lines[5] == "- seeds: 3 episodes per cell: 100000-100002 (seed=0), 1100000-1100002 (seed=1)"
    )
    assert plot_context(sweep_plan) == f"PickPlace: {names}"


def test_parents_that_vary_with_an_axis_are_named_per_cell() -> None:
    header = summary_header(plan(["sweep=demos"]))
    assert (
        "- parents: per cell: (A = PickPlace_flow_mlp_50a, B = PickPlace_flow_mlp_50b); " in header
    )
    assert "- axes: task.demos (3 values), composition.weights (3 values)" in header
