"""What one client may cost the policy server, and how each refusal is said.

    robocompose serve --checkpoint C limits.max_connections=8 limits.deadline_s=2

Every refusal closes the websocket with a code and a reason naming the setting:

    one connection more than `max_connections`   -> 1013 (try again later)
    no request for `idle_timeout_s`              -> 1000 (normal closure)
    requests faster than `max_rate_hz`           -> 1008 (policy violation)

`deadline_s` bounds each inference (the client gets an error; /healthz answers 503 while the
call runs on), `range_factor`, `out_of_range` and `action_range_factor` bound the inputs and
actions (`ranges.py`).
Light to import: the serve verb's config holds a `ServerLimits`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from robocompose.choices import check_choice, one_of

OUT_OF_RANGE_MODES = ("error", "clip")
CLOSE_IDLE = 1000
CLOSE_RATE = 1008
CLOSE_FULL = 1013


@dataclass(kw_only=True)
class ServerLimits:
    """Bounds on connections, requests and inference; every field must be > 0."""

    max_connections: int = 64  # open websocket connections; one more is closed with code 1013
    idle_timeout_s: float = 60.0  # a connection sending no request this long is closed (1000)
    # requests per second per connection, bursts of one second's worth allowed; faster closes the
    # connection (1008)
    max_rate_hz: float = 100.0
    # an inference not answered by then is an error to its client; /healthz answers 503 while it
    # runs on
    deadline_s: float = 5.0
    # inputs must lie within this many half-ranges of the centre of the policy's training data
    # (its normaliser's [min, max]: 1 is the data's own range); inf: unchecked
    range_factor: float = 10.0
    # inputs past `range_factor`: error (refused), or clip (clipped to it, with a warning)
    out_of_range: str = one_of(OUT_OF_RANGE_MODES, "error")
    # a chunk of actions beyond this many half-ranges of the training actions is never sent
    action_range_factor: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_connections", "idle_timeout_s", "max_rate_hz", "deadline_s"):
            value = getattr(self, name)
            if not 0 < value < math.inf:
                raise ValueError(f"`limits.{name}` must be > 0 and finite. Got {value}.")
        for name in ("range_factor", "action_range_factor"):
            if not getattr(self, name) >= 1.0:
                raise ValueError(f"`limits.{name}` must be >= 1. Got {getattr(self, name)}.")
        check_choice("limits.out_of_range", self.out_of_range, OUT_OF_RANGE_MODES)


class RequestRate:
    """A token bucket: `max_rate_hz` requests per second on average, at most one second's worth
    (and at least one request) in a burst."""

    def __init__(self, max_rate_hz: float) -> None:
        self.rate_hz = max_rate_hz
        self.burst = max(1.0, max_rate_hz)
        self._tokens = self.burst
        self._last = time.monotonic()

    def allow(self) -> bool:
        """Whether one more request now stays within the rate (it is counted if so)."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate_hz)
        self._last = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
