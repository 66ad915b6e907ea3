"""The measured figures' tables, written from benchmarks/results/*.json into the docs pages.

    python benchmarks/report.py            # print every table
    python benchmarks/report.py --write    # rewrite every page's generated regions
    python benchmarks/report.py --check    # exit 1 naming each page and region that differs

A page (README.md, docs/**/*.md) marks a generated region with `<!-- report:NAME -->` and
`<!-- /report:NAME -->` on lines of their own; NAME is a key of `REGIONS` (a function of a
module in report_tables/, one module per page), and what lies between the markers is that
function's table, rendered from the JSON as it is now. Everything outside the markers is
hand-written, so a figure lives in its JSON and is shown by one region only.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from common import ROOT
from report_tables import checkpoints, composition, deployment, ecosystem, planning, setup_times

PAGES = (setup_times, checkpoints, composition, planning, deployment, ecosystem)
REGIONS: dict[str, Callable[[], str]] = {f.__name__: f for page in PAGES for f in page.TABLES}
REGION = re.compile(r"(<!-- report:(\w+) -->\n)(.*?)(<!-- /report:\2 -->)", re.DOTALL)


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold generated regions."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def render(text: str, where: str) -> str:
    """`text` with every region rewritten from the JSON; an unknown region name is an error."""

    def fill(m: re.Match) -> str:
        name = m.group(2)
        if name not in REGIONS:
            raise KeyError(f"{where}: unknown region report:{name}; regions: {sorted(REGIONS)}")
        return f"{m.group(1)}{REGIONS[name]()}\n{m.group(4)}"

    return REGION.sub(fill, text)


def stale(root: Path = ROOT) -> list[str]:
    """'page: report:NAME' for each region that differs from what the JSON renders now, and
    'report:NAME is on no page' for a table no page shows."""
    found, problems = set(), []
    for page in pages(root):
        text = page.read_text()
        where = str(page.relative_to(root))
        for m in REGION.finditer(text):
            found.add(m.group(2))
            if render(m.group(0), where) != m.group(0):
                problems.append(f"{where}: report:{m.group(2)} differs from its JSON")
    problems += [f"report:{name} is on no page" for name in sorted(REGIONS.keys() - found)]
    return problems


def write(root: Path = ROOT) -> list[Path]:
    """Rewrite every page's regions; returns the pages that changed."""
    changed = []
    for page in pages(root):
        text = page.read_text()
        new = render(text, str(page.relative_to(root)))
        if new != text:
            page.write_text(new)
            changed.append(page)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the pages' generated regions")
    mode.add_argument("--check", action="store_true", help="exit 1 if a region differs")
    args = parser.parse_args()
    if args.write:
        for page in write():
            print(f"wrote {page.relative_to(ROOT)}")
    elif args.check:
        problems = stale()
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run: python benchmarks/report.py --write", file=sys.stderr)
            sys.exit(1)
    else:
        for name, table in REGIONS.items():
            print(f"## {name}\n\n{table()}\n")


if __name__ == "__main__":
    main()
