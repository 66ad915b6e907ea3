"""`robocompose rewards "INSTRUCTION"`: Language to Rewards from the shell: the LLM fills the
reward template, the sampling MPC optimises it per seed, the scripted baseline runs on the same
seeds (`robocompose.language_to_rewards.pipeline.run_config`); prints a line per
episode, then the summary as JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robocompose.language_to_rewards.pipeline import RewardsConfig


def run(config: RewardsConfig) -> dict[str, Any]:
    from robocompose.language_to_rewards.pipeline import run_config

    summary = run_config(config)
    print(json.dumps(summary, indent=2))
    return summary
