"""The package pins torch, MKL and oneDNN to AVX2 kernels on x86 (the same bits on every CPU),
leaves a user's own setting alone, and `unpin_cpu_kernels` undoes only its own pins."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="the pins are for x86 CPUs"
)

PROBE = """
import json, os
import robocompose
from robocompose.devices import unpin_cpu_kernels
names = list(robocompose.CPU_KERNEL_PINS)
before = {n: os.environ.get(n) for n in names}
unpin_cpu_kernels()
print(json.dumps([before, {n: os.environ.get(n) for n in names}]))
"""


def _probe(**env: str) -> tuple[dict, dict]:
    clean = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR",
             "ONEDNN_MAX_CPU_ISA")}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=clean | env, capture_output=True, text=True, check=True
    ).stdout
    before, after = json.loads(out)
    return before, after


def test_the_pins_are_set_and_unpinning_removes_them():
    before, after = _probe()
    assert before == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    }
    assert set(after.values()) == {None}


def test_a_users_own_setting_survives_both():
    before, after = _probe(ONEDNN_MAX_CPU_ISA="AVX512_CORE_AMX")
    assert before["ONEDNN_MAX_CPU_ISA"] == after["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE_AMX"
    assert after["ATEN_CPU_CAPABILITY"] is None
