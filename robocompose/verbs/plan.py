"""`robocompose plan "INSTRUCTION"`: plan with an LLM and run the plan in sim, printing each
round's plan; corrections typed on stdin while it runs, and the person's answer when the planner
asks or declines.

    from robocompose.hierarchical.api import PlanConfig
    from robocompose.verbs.plan import run
    run(PlanConfig(instruction="stack the red block on the blue one"))
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robocompose.hierarchical.api import PlanConfig, RunResult


def run(config: PlanConfig) -> RunResult:
    """Plan and run until done, asked or out of rounds; exits 1 (SystemExit) when the task is
    not done, so the shell sees it too."""
    from robocompose.hierarchical.api import Runner, describe, show_plan
    from robocompose.hierarchical.run.corrections import read_lines_into

    runner = Runner(config)
    print(f"{runner.item.category}: {runner.item.instruction!r} ({config.planner} planner)")
    reader = None
    if config.corrections:
        reader = read_lines_into(sys.stdin, runner.queue)
        print('type a correction and Enter while it runs ("a bit more to the left", "stop")')

    def show(i: int, plan: str | list[str]) -> None:
        print(f"\nround {i}:\n{show_plan(plan)}", flush=True)

    try:
        result = runner.run(show)
        while result.outcome in ("asked", "declined"):  # nothing moved: ask the person
            print(f"\n{result.message}\nyour answer (end the input to stop):", flush=True)
            answer = read_answer(runner.queue, reader)
            if not answer:
                break
            result = runner.answer(answer, show)
    finally:
        runner.close()
    print(describe(result, plans=False))
    if not result.success:
        raise SystemExit(1)  # every round failed (or was stopped): say so to the shell too
    return result


def read_answer(queue: Any, reader: Any) -> str | None:
    """The next line typed on stdin: from the corrections queue while its reader runs, else
    read directly; None at the end of the input."""
    if reader is None:
        line = sys.stdin.readline()
        return line.strip() or None
    while True:
        waiting = queue.poll()
        if waiting is not None:
            return waiting[1]
        if not reader.is_alive():
            waiting = queue.poll()
            return waiting[1] if waiting is not None else None
        time.sleep(0.05)
