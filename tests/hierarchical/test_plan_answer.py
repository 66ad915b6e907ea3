"""`robocompose plan` reads the answer to a question from stdin: through the corrections
reader while it runs (a typed line waits on its queue), or straight from stdin without it; the
end of the input ends the exchange."""

from __future__ import annotations

import io

import pytest

from robocompose.hierarchical.run.corrections import CorrectionQueue, read_lines_into
from robocompose.verbs.plan import read_answer


def test_the_answer_comes_through_the_corrections_reader():
    queue = CorrectionQueue()
    reader = read_lines_into(io.StringIO("\n2\n"), queue)
    assert read_answer(queue, reader) == "2"
    reader.join(timeout=5)
    assert read_answer(queue, reader) is None  # the input ended


def test_the_answer_comes_from_stdin_without_the_reader(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("use blue instead\n"))
    assert read_answer(CorrectionQueue(), None) == "use blue instead"
    assert read_answer(CorrectionQueue(), None) is None


@pytest.mark.smollm2
def test_a_run_can_start_from_an_arrangement(smollm2, tmp_path):
    from robocompose.cli import load_verb_config
    from robocompose.hierarchical.api import Runner

    overrides = ["start=[[on,green_block,red_block],[on,blue_block,green_block]]", "video=false"]
    config = load_verb_config("plan", [*overrides, f"out={tmp_path}"])
    runner = Runner(config, smollm2)
    try:
        assert ("on", "blue_block", "green_block") in runner.world.facts()
        assert runner.world.steps == 0  # arranged, not moved
    finally:
        runner.close()
