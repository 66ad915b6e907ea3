"""The README's LeRobot and Rerun recipes, read from the README itself: every `robocompose`
command parses into its verb's config (flags, keys, values: `--cfg`), every shipped file it
names exists, and every `rerun` flag it uses is one the installed Rerun CLI has. (Running them
whole takes minutes; a fresh clone runs them as written.)"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from robocompose.cli import main

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("## Bring your LeRobot data and policies", "## Look at a run")


def readme_commands(heading: str) -> list[list[str]]:
    """The commands of the section's first bash block: continuations joined, comments and
    `make` lines dropped."""
    text = (REPO / "README.md").read_text()
    start = text.index("```bash\n", text.index(heading)) + len("```bash\n")
    commands, line = [], ""
    for raw in text[start : text.index("```", start)].splitlines():
        code = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0].rstrip()
        if code.endswith("\\"):
            line += code[:-1] + " "
            continue
        line += code
        if line.strip() and not line.lstrip().startswith("make "):
            commands.append(shlex.split(line))
        line = ""
    return commands


@pytest.mark.parametrize("heading", SECTIONS)
def test_readme_robocompose_commands_parse_and_name_shipped_files(heading, capsys):
    commands = [c for c in readme_commands(heading) if c[0] == ".venv/bin/robocompose"]
    assert len(commands) >= 3
    for command in commands:
        for arg in command:
            if arg.startswith(("checkpoints/", "tests/fixtures/")):
                assert (REPO / arg).exists(), f"{arg} in {shlex.join(command)}"
        main([*command[1:], "--cfg"])  # an unknown flag, key or value exits naming it
    assert capsys.readouterr().out


def test_readme_rerun_commands_use_flags_the_rerun_cli_has():
    pytest.importorskip("rerun")
    commands = [c for h in SECTIONS for c in readme_commands(h) if c[0] == ".venv/bin/rerun"]
    assert commands
    rerun = Path(sys.executable).parent / "rerun"
    usage = subprocess.run([str(rerun), "--help"], capture_output=True, text=True).stdout
    for command in commands:
        for flag in (a for a in command if a.startswith("--")):
            assert f"  {flag}" in usage, f"{flag} in {shlex.join(command)}"
