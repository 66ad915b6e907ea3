"""`robocompose timing-check`: can this computer hold an arm's servo rate? The MuJoCo twin
driven at `rate_hz` (no arm moves), optionally with a checkpoint's inference looping meanwhile
(`robocompose.real_robot.timing_check`); prints the result as JSON. Run it on the robot
computer before the first motion.

Light to import (the command line reads `TimingCheckConfig` for `--help`); `run` imports MuJoCo.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(kw_only=True)
class TimingCheckConfig:
    """`robocompose timing-check`: the servo rate, how long, and the inference beside it."""

    rate_hz: float = 500.0  # servo rate: 500 UR, 250 xArm, 100 Franka
    seconds: float = 10.0
    checkpoint: str | None = None  # run its inference in a loop on another core meanwhile
    fifo: bool = True  # ask for SCHED_FIFO (priority 50)

    def __post_init__(self) -> None:
        if self.rate_hz <= 0 or self.seconds <= 0:
            raise ValueError(
                f"`rate_hz` and `seconds` must be > 0. Got {self.rate_hz} and {self.seconds}."
            )


def run(config: TimingCheckConfig) -> dict[str, Any]:
    """Measure, print and return the period error and whether p99 meets the goal."""
    from robocompose.real_robot.timing_check import check_timing

    result = check_timing(config.rate_hz, config.seconds, config.checkpoint, config.fifo)
    print(json.dumps(result, indent=1))
    return result
