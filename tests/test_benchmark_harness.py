"""The benchmark harness (benchmarks/common.py): the `--parts` flag every script parses, the
results file several processes and scripts write at once, and the JSONL records a rerun resumes."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", BENCHMARKS / "common.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while it is made
    spec.loader.exec_module(module)
    return module


common = _common()
PARTS = ("quality", "latency", "selector")


def _parser(default=None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    common.add_parts(parser, PARTS, default=default)
    return parser


def test_parts_flag_parses_a_comma_list_all_and_the_default():
    parser = _parser(default=("quality", "latency"))
    assert parser.parse_args([]).parts == ("quality", "latency")
    assert parser.parse_args(["--parts", "all"]).parts == ("quality", "latency")
    assert parser.parse_args(["--parts", "selector,quality"]).parts == ("selector", "quality")


def test_parts_flag_refuses_an_unknown_part_by_name(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["--parts", "quality,speed"])
    assert "unknown part 'speed'" in capsys.readouterr().err


def test_set_changes_only_its_nested_key(tmp_path):
    results = common.ResultsFile("x.json", writer="x.py", folder=tmp_path)
    results.set(["a", "b"], 1)
    results.set(["a", "c"], [2])
    results.set(["d"], "e")
    assert results.read() == {"a": {"b": 1, "c": [2]}, "d": "e"}
    assert results.path.read_text().endswith("}\n")


_WRITER = """
import sys
sys.path.insert(0, {benchmarks!r})
from common import ResultsFile
from pathlib import Path
results = ResultsFile("shared.json", writer="w.py", folder=Path({folder!r}))
for i in range(40):
    results.update(lambda d: d.setdefault({key!r}, []).append(i))
"""


def test_two_processes_writing_one_file_lose_no_update(tmp_path):
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER.format(benchmarks=str(BENCHMARKS), folder=str(tmp_path), key=key),
            ]
        )
        for key in ("first", "second")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    document = json.loads((tmp_path / "shared.json").read_text())
    assert document == {"first": list(range(40)), "second": list(range(40))}


def test_a_shared_file_refuses_a_key_another_script_owns(tmp_path):
    skills = common.ResultsFile("skills.json", writer="skills.py", folder=tmp_path)
    rewards = common.ResultsFile("skills.json", writer="language_to_rewards.py", folder=tmp_path)
    skills.set(["place_in"], {"scripted": 0.9})
    rewards.set(["language_to_rewards"], {"model": "m"})
    before = skills.path.read_text()
    with pytest.raises(ValueError, match="'place_in' belongs to skills.py"):
        rewards.set(["place_in"], {})
    with pytest.raises(ValueError, match="'language_to_rewards' belongs to language_to_rewards"):
        skills.write({"place_in": {}})
    assert skills.path.read_text() == before
    with pytest.raises(ValueError, match="writer must be one of"):
        common.ResultsFile("skills.json", writer="hierarchical.py", folder=tmp_path)
    reader = common.ResultsFile("skills.json", folder=tmp_path)
    assert reader.read()["place_in"] == {"scripted": 0.9}
    with pytest.raises(ValueError, match="not a reader"):
        reader.set(["x"], 1)
    assert skills.path.read_text() == before


def test_resume_records_runs_only_the_missing_keys(tmp_path):
    path, ran = tmp_path / "runs" / "episodes.jsonl", []

    def run(seed):
        ran.append(seed)
        if seed == 3 and len(ran) == 3:
            raise KeyboardInterrupt  # the first run stops in its third episode
        return {"success": seed % 2 == 0}

    with pytest.raises(KeyboardInterrupt):
        common.resume_records(path, [1, 2, 3, 4], run, key_field="seed")
    assert [r["seed"] for r in common.read_jsonl(path)] == [1, 2]
    records = common.resume_records(path, [1, 2, 3, 4], run, key_field="seed")
    assert ran == [1, 2, 3, 3, 4]
    assert records == [{"seed": s, "success": s % 2 == 0} for s in (1, 2, 3, 4)]


def test_only_the_harness_writes_a_json_document():
    """Scripts write their results through `ResultsFile` (re-read, change, write, under the
    lock); none writes a JSON document of its own (JSONL records are appended line by line)."""
    writers = [
        f"{path.relative_to(BENCHMARKS)}:{number}"
        for path in sorted(BENCHMARKS.rglob("*.py"))
        if path.name not in ("common.py", "report.py")  # report.py writes the docs' markdown
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "write_text(" in line or "json.dump(" in line
    ]
    assert not writers, f"write through common.ResultsFile instead: {writers}"
