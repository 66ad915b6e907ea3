"""The LeRobot and Rerun guides' recipes, read from the pages themselves: every `robocompose`
command parses into its verb's config (flags, keys, values: `--cfg`), every shipped file it
names exists, and every `rerun` flag it uses is one the installed Rerun CLI has. (Running them
whole takes minutes; a fresh clone runs them as written.)"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from robocompose.cli import main
from robocompose.shipped import CHECKPOINTS

REPO = Path(__file__).resolve().parents[2]
SECTIONS = (("docs/lerobot.md", "# LeRobot data and policies"), ("docs/viz.md", "# Look at a run"))


def doc_commands(page: str, heading: str) -> list[list[str]]:
    """The commands of the first bash block after `heading` in `page`: continuations joined,
    comments and `make` lines dropped."""
    text = (REPO / page).read_text()
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


@pytest.mark.parametrize(("page", "heading"), SECTIONS)
def test_guide_robocompose_commands_parse_and_name_shipped_files(page, heading, capsys):
    commands = [c for c in doc_commands(page, heading) if c[0] == ".venv/bin/robocompose"]
    assert len(commands) >= 3
    for command in commands:
        for arg in command:
            if arg.startswith("tests/fixtures/"):
                assert (REPO / arg).exists(), f"{arg} in {shlex.join(command)}"
            elif re.fullmatch(r"[A-Z]\w+_(diffusion|flow|image)\w*", arg):
                assert (CHECKPOINTS / arg / "config.json").is_file(), f"{arg}: not shipped"
        main([*command[1:], "--cfg"])  # an unknown flag, key or value exits naming it
    assert capsys.readouterr().out


def test_guide_rerun_commands_use_flags_the_rerun_cli_has():
    pytest.importorskip("rerun")
    commands = [c for p, h in SECTIONS for c in doc_commands(p, h) if c[0] == ".venv/bin/rerun"]
    assert commands
    rerun = Path(sys.executable).parent / "rerun"
    usage = subprocess.run([str(rerun), "--help"], capture_output=True, text=True).stdout
    for command in commands:
        for flag in (a for a in command if a.startswith("--")):
            assert f"  {flag}" in usage, f"{flag} in {shlex.join(command)}"
