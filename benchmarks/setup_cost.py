"""What the two commands cost on a fresh clone: setup, `make demo`, `make test`.

Clones the repository's committed main into a temporary folder and runs, timed in that order:
`make setup-all` (both venvs, every extra: what `make test` sets up before testing), `make demo`
(its setup is then done: the demo alone) and `make test`, whose two pytest passes are read from
its output (each pass's closing line gives its count and seconds). pip's cache is whatever this
machine has: `pip_cache` says whether the one slow build (llama-cpp-python's wheel, ~7 minutes)
was in it. The clone is removed afterwards.

    python benchmarks/setup_cost.py [--runs 2] [--skip-demo]

Appends one row per run to `runs` in benchmarks/results/setup.json (docs/results/setup.md's
tables are written from it) and sets `latest`; each run's logs stay in
runs/benchmarks/setup_cost/<time>/ (`--reparse ROW LOG` recounts a row's tests from one).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import ROOT, ResultsFile, cpu_model

RESULTS = ResultsFile("setup.json", writer="setup_cost.py")
VENVS = (".venv", ".venv-lerobot")
PASSES = ("parallel", "realtime")  # make test's pytest runs, in order
# pytest's closing line, framed in "=" or (under -q) bare: "1 failed, 1388 passed, 19 skipped,
# 33 warnings in 3435.12s (0:57:15)"
CLOSING = re.compile(
    r"^=* ?(?P<counts>\d+ (?:passed|failed|skipped|errors?|deselected)\b.*?) in "
    r"(?P<seconds>[\d.]+)s",
    re.MULTILINE,
)
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected)")


def pip_cache_state() -> str:
    """warm: pip's wheel cache holds a built llama-cpp-python (the one source build)."""
    done = subprocess.run(
        ["pip", "cache", "list", "llama_cpp_python"], capture_output=True, text=True
    )
    return "warm" if "llama_cpp_python" in done.stdout else "cold"


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder`, links not followed (a linked torch counts once)."""
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def timed_make(clone: Path, target: str, log: Path, check: bool = True) -> tuple[float, str, int]:
    """Seconds, output and exit status of `make target` in `clone`; a failure stops the run
    unless `check` is off (a red test run is recorded as such)."""
    start = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run(
            ["make", target], cwd=clone, stdout=sink, stderr=subprocess.STDOUT, env=_env()
        )
    seconds = time.perf_counter() - start
    if check and done.returncode != 0:
        raise SystemExit(f"`make {target}` failed (exit {done.returncode}); its log: {log}")
    return seconds, log.read_text(errors="replace"), done.returncode


def _env() -> dict[str, str]:
    """This machine's environment, less a virtualenv this script may run in."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bin_dir = str(Path(os.environ.get("VIRTUAL_ENV", "/nonexistent")) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    return env


def test_passes(output: str) -> list[dict]:
    """Each pytest pass's counts and seconds, from its closing line."""
    passes = []
    for match in CLOSING.finditer(output):
        counts = {word: int(number) for number, word in COUNT.findall(match["counts"])}
        passes.append({"seconds": float(match["seconds"]), **counts})
    return passes


def test_fields(output: str) -> dict:
    """The row's test figures from `make test`'s output."""
    passes = test_passes(output)
    return {
        "test_pass_s": {name: p["seconds"] for name, p in zip(PASSES, passes, strict=False)},
        "tests_passed": sum(p.get("passed", 0) for p in passes),
        "tests_failed": sum(p.get("failed", 0) for p in passes),
        "tests_skipped": sum(p.get("skipped", 0) for p in passes),
    }


def one_run(skip_demo: bool, logs: Path) -> dict:
    cache = pip_cache_state()
    with tempfile.TemporaryDirectory(prefix="robocompose-clone-") as tmp:
        clone = Path(tmp) / "robocompose"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
        ).stdout.strip()
        setup_s = timed_make(clone, "setup-all", logs / "setup.log")[0]
        demo_s = None if skip_demo else timed_make(clone, "demo", logs / "demo.log")[0]
        test_s, output, status = timed_make(clone, "test", logs / "test.log", check=False)
        venv_bytes = {venv: folder_bytes(clone / venv) for venv in VENVS}
        shutil.rmtree(clone, ignore_errors=True)
    return {
        "commit": commit,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "pip_cache": cache,
        "setup_s": round(setup_s, 1),
        "demo_s": None if demo_s is None else round(demo_s, 1),
        "test_s": round(test_s, 1),
        "test_exit": status,
        **test_fields(output),
        "venv_bytes": venv_bytes,
        "venv_bytes_total": sum(venv_bytes.values()),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--skip-demo", action="store_true", help="time setup and tests only")
    parser.add_argument(
        "--reparse",
        nargs=2,
        metavar=("ROW", "LOG"),
        help="recount row ROW's (an index into runs) test figures from its saved `make test` log",
    )
    args = parser.parse_args()
    if args.reparse:
        index, log = int(args.reparse[0]), Path(args.reparse[1])
        fields = test_fields(log.read_text(errors="replace"))

        def recount(doc: dict) -> None:
            doc["runs"][index].update(fields)
            doc["latest"] = doc["runs"][-1]

        RESULTS.update(recount)
        print(RESULTS.read()["runs"][index])
        return
    for _ in range(args.runs):
        logs = ROOT / "runs" / "benchmarks" / "setup_cost" / time.strftime("%Y%m%dT%H%M%S")
        logs.mkdir(parents=True, exist_ok=True)
        row = one_run(args.skip_demo, logs)
        RESULTS.update(lambda doc, row=row: doc.setdefault("runs", []).append(row))
        RESULTS.set(["latest"], row)
        print(row)


if __name__ == "__main__":
    main()
