"""What the code sandbox costs a planner: the static check, a child's start-up, one API round trip.

Medians over repeated runs; the load average is recorded because the machine is shared.

    python benchmarks/sandbox.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import ResultsFile, median_ms

from robocompose.hierarchical.base import Param
from robocompose.hierarchical.sandbox import (
    ApiFunction,
    SandboxAPI,
    SandboxLimits,
    check_program,
    run_program,
)

PROGRAM = """
def stack(order):
    for top, bottom in zip(order[1:], order):
        pick(top)
        place(top, bottom)

names = sorted(object_names())
stack(names)
print(len(names))
"""
CALLS = 5000


def api() -> SandboxAPI:
    obj = Param("obj", "str", choices=("red", "green", "blue"))
    return SandboxAPI(
        [
            ApiFunction("pick", (obj,), lambda args: True),
            ApiFunction("place", (obj, Param("target", "str")), lambda args: True),
            ApiFunction("object_names", (), lambda args: ["red", "green", "blue"]),
            ApiFunction("noop", (), lambda args: None),
        ]
    )


def ok(code: str, limits: SandboxLimits):
    def run() -> None:
        result = run_program(code, api(), limits)
        if not result.ok:
            raise RuntimeError(result.error)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    limits = SandboxLimits(max_calls=CALLS + 10)
    names = list(api().functions)
    interpreter = [sys.executable, "-I", "-c", "pass"]
    row = {
        "load_average_1min": os.getloadavg()[0],
        "repeats": args.repeats,
        "check_ms": median_ms(lambda: check_program(PROGRAM, names), 10 * args.repeats),
        "python_start_ms": median_ms(lambda: subprocess.run(interpreter), args.repeats),
        "run_trivial_ms": median_ms(ok("x = 1", limits), args.repeats),
        "run_trivial_numpy_ms": median_ms(ok("x = np.zeros(3)", limits), args.repeats),
        "run_stack_program_ms": median_ms(ok(PROGRAM, limits), args.repeats),
    }
    many = median_ms(ok(f"for i in range({CALLS}):\n    noop()", limits), args.repeats)
    row["api_round_trip_ms"] = (many - row["run_trivial_ms"]) / CALLS
    print(json.dumps(row, indent=2), flush=True)
    ResultsFile("sandbox.json", writer="sandbox.py").write(row)


if __name__ == "__main__":
    main()
