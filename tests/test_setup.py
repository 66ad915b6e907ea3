"""What `make setup-all` leaves on a CPU machine: no CUDA library in either venv (a CUDA torch
and its runtime are ~8 GB that a CPU cannot use), and LeRobot's venv on the project's torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")

REPORT = """
import importlib.metadata as m, json, torch
names = sorted({d.metadata["Name"].lower() for d in m.distributions()})
print(json.dumps({"names": names, "torch": torch.__version__, "cuda": torch.version.cuda,
                  "torch_file": torch.__file__}))
"""


def _report(python: Path | str) -> dict:
    done = subprocess.run([str(python), "-c", REPORT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module", autouse=True)
def _cpu_machine() -> None:
    if Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has a GPU: a CUDA torch is a choice here")


@pytest.mark.parametrize("venv", ["project", "lerobot"])
def test_no_cuda_package_in_either_venv(venv: str) -> None:
    if venv == "lerobot" and not LEROBOT_PYTHON.exists():
        pytest.skip("LeRobot's own environment is missing: `make setup-all` builds .venv-lerobot")
    report = _report(sys.executable if venv == "project" else LEROBOT_PYTHON)
    cuda = [name for name in report["names"] if name.startswith(CUDA_PREFIXES)]
    assert cuda == [], f"CUDA packages in the {venv} venv: {cuda}"
    assert report["cuda"] is None and report["torch"].endswith("+cpu"), report["torch"]


def test_lerobot_runs_on_the_projects_torch() -> None:
    if not LEROBOT_PYTHON.exists():
        pytest.skip("LeRobot's own environment is missing: `make setup-all` builds .venv-lerobot")
    import torch

    report = _report(LEROBOT_PYTHON)
    assert Path(report["torch_file"]).resolve() == Path(torch.__file__).resolve()
    assert report["torch"] == torch.__version__
