"""Does the demo's table depend on the CPU's kernel path? The demo run with the paths pinned
(robocompose's default: AVX2 in torch, MKL and oneDNN, which every x86 machine here has) and with
the pins lifted (each library's widest path on this CPU: AVX-512 on a Xeon), on one machine.

Two CPU kinds (an AVX-512 Xeon, an EPYC) gave different demo tables before the pins: MKL's BLAS,
torch's and oneDNN's kernels each pick the widest instruction set present, a policy's actions then
differ in the last bits, and closed-loop episodes drift apart. Forcing both paths on one machine
shows how far the table moves with the path alone (the tolerance a table computed off the pinned
path holds to), and the pinned run is the table every x86 machine prints.

    python benchmarks/cpu_paths.py [--episodes 100]

Each variant is `robocompose demo` in its own process (the pins are read when torch starts), its
episodes under runs/benchmarks/cpu_paths/<variant>/, so a rerun resumes. Writes
benchmarks/results/cpu_paths.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from common import ROOT, RUNS_DIR, ResultsFile, cpu_model

from robocompose import CPU_KERNEL_PINS

RESULTS = ResultsFile("cpu_paths.json", writer="cpu_paths.py")


def widest_paths() -> dict[str, str]:
    """The settings that let each library take this CPU's widest path (the pins lifted)."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return {
        "ATEN_CPU_CAPABILITY": "avx512" if "avx512f" in flags else "avx2",
        "MKL_CBWR": "AUTO",
        "ONEDNN_MAX_CPU_ISA": "ALL",
    }


def run_demo(variant: str, paths: dict[str, str], episodes: int) -> dict:
    out = RUNS_DIR / "cpu_paths" / variant
    command = [sys.executable, "-m", "robocompose", "demo", f"episodes={episodes}", f"out={out}"]
    subprocess.run(command, cwd=ROOT, env={**os.environ, **paths}, check=True)
    record = json.loads((out / "Stack" / "demo.json").read_text())
    probe = "import robocompose, torch; print(torch.backends.cpu.get_cpu_capability())"
    capability = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, **paths},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    rows = [
        {k: row[k] for k in ("label", "success", "episodes", "mean_score")}
        for row in record["rows"]
    ]
    return {"settings": paths, "aten_capability": capability, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    variants = {"pinned": dict(CPU_KERNEL_PINS), "widest": widest_paths()}
    results = {name: run_demo(name, paths, args.episodes) for name, paths in variants.items()}
    pinned, widest = (results[name]["rows"] for name in variants)
    differences = [
        round(100 * abs(a["success"] - b["success"]), 1)
        for a, b in zip(pinned, widest, strict=True)
    ]
    summary = {
        "cpu": cpu_model(),
        "episodes": args.episodes,
        "variants": results,
        "same_table": pinned == widest,
        "max_success_difference_points": max(differences),
        "success_difference_points": differences,
    }
    RESULTS.set(["demo"], summary)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
