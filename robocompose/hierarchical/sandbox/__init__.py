"""Run LLM-written programs safely: a static allow-list, then an isolated child process.

    result = run_program(code, api, SandboxLimits(cpu_s=2, wall_s=5))

- `api = SandboxAPI([ApiFunction(name, params, run, description), ...])`, or
  `SandboxAPI.from_skills(skills, execute, perception=[...])` for a skill registry, where
  `execute(name, args)` runs one validated call in the parent (it may raise: the program then
  fails with that error). `params` are `base.Param`s ("str" with choices, "float"/"int" with
  low/high, "vec2"); every call is validated against them before `run` is called.
- The program sees only: the API functions (stubs that message the parent), safe builtins,
  read-only views of `math` and `np` (listed in names.py), and `print` (captured).
- `ProgramResult`: `ok`, `error` (with the program's line), `refused` (static check; nothing ran),
  `limit` (which budget stopped it: cpu, wall, memory, steps, recursion, calls, stdout, protocol),
  `killed`, `calls` (every call asked for; `executed_calls` those the parent ran), `stdout`,
  `cpu_s`, `wall_s`, `isolation` (OS layers the child applied).
- `check_program(code, api_names)` alone gives the static verdict (SandboxRefusal lists every
  problem).

Layers, outermost first: AST allow-list (ast_check.py) -> step budget instrumented into every
loop and call -> child process (child.py) with its own process group, no network namespace, the
`nobody` user when started as root, rlimits on CPU, address space, processes, files -> the
parent's wall clock and message checks (runner.py). Costs (benchmarks/sandbox.py, 2 shared
cores): the check 0.3 ms; a run 0.05 s at load 5, 0.17 s at load 12, twice that when the program
names `np` (the child imports numpy only then); an API call 0.05-0.13 ms.
"""

from robocompose.hierarchical.sandbox.api import ApiFunction, SandboxAPI, validate_args
from robocompose.hierarchical.sandbox.ast_check import SandboxRefusal, check_program
from robocompose.hierarchical.sandbox.limits import (
    LIMITS,
    CallRecord,
    ProgramResult,
    SandboxLimits,
)
from robocompose.hierarchical.sandbox.runner import run_program

__all__ = [
    "LIMITS",
    "ApiFunction",
    "CallRecord",
    "ProgramResult",
    "SandboxAPI",
    "SandboxLimits",
    "SandboxRefusal",
    "check_program",
    "run_program",
    "validate_args",
]
