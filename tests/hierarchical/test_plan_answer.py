"""`robocompose plan` reads the answer to a question from stdin: through the corrections
reader while it runs (a typed line waits on its queue), or straight from stdin without it; the
end of the input ends the exchange."""

from __future__ import annotations

import io

from robocompose.cli import _read_answer
from robocompose.hierarchical.run.corrections import CorrectionQueue, read_lines_into


def test_the_answer_comes_through_the_corrections_reader():
    queue = CorrectionQueue()
    reader = read_lines_into(io.StringIO("\n2\n"), queue)
    assert _read_answer(queue, reader) == "2"
    reader.join(timeout=5)
    assert _read_answer(queue, reader) is None  # the input ended


def test_the_answer_comes_from_stdin_without_the_reader(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("use blue instead\n"))
    assert _read_answer(CorrectionQueue(), None) == "use blue instead"
    assert _read_answer(CorrectionQueue(), None) is None
