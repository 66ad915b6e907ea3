"""How much a sandboxed program may use, and what running it produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Which limit stopped a program (`ProgramResult.limit`).
LIMITS = ("cpu", "wall", "memory", "steps", "recursion", "calls", "stdout", "protocol")


@dataclass(frozen=True)
class SandboxLimits:
    """Budgets of one run. `wall_s` counts the program's own time: the seconds the parent spends
    executing its skill calls (the robot moving) are not charged to it."""

    cpu_s: int = 5
    wall_s: float = 10.0
    memory_mb: int = 512
    max_steps: int = 100_000  # loop iterations + comprehension items + function calls
    max_recursion: int = 100  # nested calls of the program's own functions
    max_calls: int = 100  # API calls the parent will execute
    max_stdout_chars: int = 10_000
    max_code_chars: int = 20_000
    max_message_bytes: int = 65_536  # one message from the child; larger ones kill it

    def __post_init__(self) -> None:
        bounds: dict[str, tuple[float, float]] = {
            "cpu_s": (1, 3600),
            "wall_s": (0.5, 36_000),
            "memory_mb": (256, 65_536),
            "max_steps": (1, 10**9),
            "max_recursion": (1, 10_000),
            "max_calls": (0, 100_000),
            "max_stdout_chars": (0, 10**7),
            "max_code_chars": (1, 10**6),
            "max_message_bytes": (1024, 2**26),
        }
        for name, (low, high) in bounds.items():
            value = getattr(self, name)
            accepted = (int, float) if name == "wall_s" else (int,)
            if isinstance(value, bool) or not isinstance(value, accepted):
                kind = "a number" if name == "wall_s" else "an int"
                raise TypeError(f"`{name}` must be {kind}. Got {value!r}.")
            if not low <= value <= high:
                raise ValueError(f"`{name}` must be in [{low}, {high}]. Got {value}.")


@dataclass
class CallRecord:
    """One API call the program asked for: executed by the parent, or refused with a reason."""

    name: str
    args: dict[str, Any]  # validated arguments, or the raw ones when refused
    executed: bool
    value: Any = None
    error: str | None = None


@dataclass
class ProgramResult:
    """What a run did. `refused`: the static check said no and nothing ran. `limit`: which limit
    stopped it (one of LIMITS). `killed`: the parent had to kill the child process."""

    ok: bool
    error: str | None = None
    refused: bool = False
    limit: str | None = None
    killed: bool = False
    calls: list[CallRecord] = field(default_factory=list)
    stdout: str = ""
    cpu_s: float = 0.0
    wall_s: float = 0.0
    isolation: tuple[str, ...] = ()  # the OS layers the child applied, e.g. "no-network"

    @property
    def executed_calls(self) -> list[CallRecord]:
        return [c for c in self.calls if c.executed]
