"""`robocompose deploy ... viewer=rerun`: the deploy loop's step log, streamed to Rerun as it runs.

A step log with `JsonlWriter`'s interface (`write(line)`, `close()`) that writes each line on
and logs it, so the loop itself is unchanged. Per episode, under `seed_<seed>/`, on the
timeline `tick`:

    obs/<key>           low-dim observation keys (images are summarised in the log, not shown)
    command/proposed    the policy's action for the tick (x, y, z, gripper)     Scalars
    command/sent        what the safety layer sent after clamping               Scalars
    measured            the arm's end effector and gripper as read              Scalars
    space/measured, space/sent   the same, as 3-D points                        Points3D
    safety              each safety event (clamp, stop...) with its reason      TextLog
    clamps              safety events this tick                                 Scalars
    period_s            the tick's period (jitter)                              Scalars
    outcome             the episode's record at its end                         TextLog
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from robocompose.viz.recording import close_recording, open_recording, rerun


class RerunStepLog:
    """Write `log`'s lines and stream each to a Rerun recording (`save`: an .rrd instead)."""

    def __init__(self, log: Any, save: str | os.PathLike[str] | None, name: str) -> None:
        self.log = log
        self.rr = rerun()
        self.stream = open_recording(save, name)
        self.root = "seed_?"

    def write(self, line: dict[str, Any]) -> None:
        self.log.write(line)
        kind = line.get("kind")
        if kind == "episode_start":
            self.root = f"seed_{line['seed']}"
        elif kind == "step":
            self._step(line)
        elif kind == "episode_end":
            outcome = "success" if line.get("success") else "failure"
            text = f"{outcome}: score {line.get('score', 0.0):.3f}, {line.get('ticks')} ticks"
            self.stream.log(f"{self.root}/outcome", self.rr.TextLog(text))

    def _step(self, line: dict[str, Any]) -> None:
        rr, log, root = self.rr, self.stream.log, self.root
        self.stream.set_time("tick", sequence=int(line["tick"]))
        for key, value in (line.get("obs") or {}).items():
            if isinstance(value, list):
                log(f"{root}/obs/{key}", rr.Scalars(np.asarray(value, dtype=np.float64).ravel()))
        measured = [*line["ee_m"], line["gripper"]]
        log(f"{root}/measured", rr.Scalars(np.asarray(measured, dtype=np.float64)))
        log(f"{root}/space/measured", rr.Points3D([line["ee_m"][:3]]))
        for name in ("proposed", "sent"):
            if line.get(name) is not None:
                log(f"{root}/command/{name}", rr.Scalars(np.asarray(line[name], dtype=np.float64)))
        if line.get("sent") is not None:
            log(f"{root}/space/sent", rr.Points3D([line["sent"][:3]]))
        safety = line.get("safety") or []
        for event in safety:
            log(f"{root}/safety", rr.TextLog(f"{event['kind']}: {event['reason']}", level="WARN"))
        log(f"{root}/clamps", rr.Scalars(float(len(safety))))
        if line.get("period_s") is not None:
            log(f"{root}/period_s", rr.Scalars(float(line["period_s"])))

    def close(self) -> None:
        try:
            self.log.close()
        finally:
            close_recording(self.stream)
