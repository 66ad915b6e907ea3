"""What the command line imports when it runs nothing: no torch to compose any verb's config,
and not even MuJoCo or gymnasium for help, version, a config error or `--cfg` (nor Hydra for
help and version). Timings are in benchmarks/cli_startup.py, not here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SIM = ("torch", "mujoco", "gymnasium")
MARK = "IMPORTED: "


def imported_by(code: str) -> tuple[set[str], str]:
    """The top-level packages a fresh interpreter holds after `code`, and what it printed."""
    packages = "sorted({m.split('.')[0] for m in sys.modules})"
    report = f"import json, sys\nprint({MARK!r} + json.dumps({packages}))"
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out, _, listed = done.stdout.rpartition(MARK)
    return set(json.loads(listed)), out + done.stderr


def test_every_verb_config_composes_without_torch() -> None:
    code = (
        "from robocompose.cli import VERBS\n"
        "from robocompose.config import compose_all\n"
        "for name, verb in VERBS.items():\n"
        "    compose_all(name, verb.config_class(), [[]])\n"
    )
    imported, _ = imported_by(code)
    assert "torch" not in imported


@pytest.mark.parametrize(
    ("args", "says", "absent"),
    [
        (["--version"], "robocompose ", (*SIM, "hydra", "omegaconf")),
        (["eval", "--help"], "checkpoint: str (required)", (*SIM, "hydra", "omegaconf")),
        (["eval", "bogus=1"], "unknown config key 'bogus'", SIM),
        (["compose", "--cfg"], "composition:", SIM),
        (["sweep", "bogus=1"], "unknown config key 'bogus'", SIM),
        (["sweep", "composition=convex,nonesuch"], "composition/nonesuch", SIM),
    ],
)
def test_commands_that_run_nothing_import_no_simulator_or_torch(
    args: list[str], says: str, absent: tuple[str, ...]
) -> None:
    code = (
        "from robocompose.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as e:\n"
        "    print(e)\n"
    )
    imported, printed = imported_by(code)
    assert says in printed
    assert not imported & set(absent), f"robocompose {' '.join(args)} imported them"
