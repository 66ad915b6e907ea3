"""`robocompose deploy ROBOT`: a policy on an arm (or its MuJoCo twin) at a fixed rate, every
tick logged, episodes resumable (`robocompose.real_robot.deploy`); prints where the logs go, a
line per episode and the success.

Light to import (the command line reads `DeployConfig` for `--help`); `run` imports the loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robocompose.real_robot.deploy import DeployConfig


def run(config: DeployConfig) -> dict[str, Any]:
    """Run the episodes not yet logged; prints and returns the run's summary."""
    from robocompose.real_robot.deploy import deploy

    out = Path(config.out)
    episodes = out / "episodes.jsonl"
    print(f"step log: {out / 'steps.jsonl'} (every command as sent); episodes: {episodes}")
    summary = deploy(config)
    print(f"success {summary['success_text']}; step log {summary['steps_log']}")
    return summary
