"""How long the command line takes to answer when it runs nothing: version, help, a config error,
`--cfg`. These are what a user types while finding their way, so they should answer at once.

For each command: the median wall time of `--runs` runs of the installed `robocompose` script,
and, from one `python -X importtime -m robocompose ...` run, the packages whose import cost the
most (cumulative, per top-level package) and which heavy ones (torch, mujoco, ...) were loaded.

    python benchmarks/cli_startup.py --label before   # then change the code
    python benchmarks/cli_startup.py --label after

Results go to benchmarks/results/cli_startup.json under the label; other labels are kept.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from common import ROOT, ResultsFile

RESULTS = ResultsFile("cli_startup.json", writer="cli_startup.py")
# (arguments, text the output must contain: proof the command did what it is timed for)
COMMANDS = (
    (["--version"], "robocompose "),
    (["eval", "--help"], "usage: robocompose eval"),
    (["eval", "bogus=1"], "bogus"),
    (["compose", "--cfg"], "composition:"),
)
HEAVY = ("torch", "mujoco", "gymnasium", "ray", "matplotlib", "h5py", "diffusers", "tensorboard")


def script() -> str:
    """The console script installed beside this interpreter (what a user runs)."""
    beside = Path(sys.executable).with_name("robocompose")
    found = str(beside) if beside.is_file() else shutil.which("robocompose")
    if found is None:
        raise SystemExit("no `robocompose` script: install the package (`make setup`).")
    return found


def run(command: list[str], expect: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    seconds = time.perf_counter() - start
    if expect not in done.stdout + done.stderr:
        raise SystemExit(
            f"{' '.join(command)} printed no {expect!r} (exit {done.returncode}):\n"
            f"{done.stdout}{done.stderr}"
        )
    return seconds


def import_costs(args: list[str], top: int) -> dict:
    """Cumulative import time per top-level package, from `-X importtime` (stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "robocompose", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    per_package: dict[str, int] = {}
    total = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split(":", 1)[1].split("|")
        if not name.startswith("  "):  # one space: imported by no other module, count once
            total += int(cumulative)
        package = name.strip().split(".")[0]
        # a package's outermost import holds all of its own nested ones
        per_package[package] = max(per_package.get(package, 0), int(cumulative))
    ranked = sorted(per_package.items(), key=lambda kv: -kv[1])
    return {
        "imports_total_ms": round(total / 1e3, 1),
        "top_ms": {name: round(us / 1e3, 1) for name, us in ranked[:top]},
        "heavy_imported": sorted(p for p in HEAVY if p in per_package),
    }


def measure(runs: int, top: int) -> dict:
    robocompose = script()
    # the interpreter alone (site, the editable install's finder): what no import change saves
    floor = [
        run([sys.executable, "-c", "print('robocompose ')"], "robocompose ") for _ in range(runs)
    ]
    commands = {}
    for args, expect in COMMANDS:
        times = [run([robocompose, *args], expect) for _ in range(runs)]
        commands[" ".join(["robocompose", *args])] = {
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
            "runs": runs,
            **import_costs(args, top),
        }
        print(f"{' '.join(args):>16}: {statistics.median(times):.2f} s", flush=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "python_alone_median_s": round(statistics.median(floor), 3),
        "commands": commands,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="after", help="key of this measurement in the JSON")
    parser.add_argument("--runs", type=int, default=5, help="runs per command (median)")
    parser.add_argument("--top", type=int, default=8, help="packages listed per command")
    args = parser.parse_args()
    RESULTS.set([args.label], measure(args.runs, args.top))
    print(f"wrote {RESULTS.path} [{args.label}]")


if __name__ == "__main__":
    main()
