"""The README and docs/ stand as a newcomer reads them: the README stays short and shows every
verb, its figures come from the results JSON (report regions), and every relative link lands on
a file that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from robocompose.verbs import VERBS

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
REGION = re.compile(r"<!-- report:(\w+) -->.*?<!-- /report:\1 -->", re.DOTALL)


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= 400


def test_the_readme_shows_every_verb():
    text = README.read_text()
    missing = [verb for verb in VERBS if f"robocompose {verb} " not in text]
    assert not missing, f"no README example for {missing}"


def test_the_readme_quotes_no_figure_outside_a_generated_region():
    """Measured figures live on the results pages; the README's only table is the demo's."""
    prose = REGION.sub("", README.read_text())
    assert not re.findall(r"\d+(?:\.\d+)?%", prose)


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = target.split("#", 1)[0]
            if path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken


def test_every_readme_command_parses_into_its_verbs_config(capsys):
    """An unknown flag, key or value in a README example exits naming it (`--cfg`: nothing runs)."""
    from robocompose.cli import main

    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.DOTALL):
        for line in block.splitlines():
            code = line.split(" #", 1)[0].strip()
            if code.startswith("robocompose "):
                main([*shlex.split(code)[1:], "--cfg"])
    assert capsys.readouterr().out
