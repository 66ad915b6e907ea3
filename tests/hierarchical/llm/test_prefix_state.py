"""A prompt's fixed part kept as a KV state on disk: a new process evaluates only the request,
and answers as a cold one does; a changed prompt or a damaged file is evaluated again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from robocompose.hierarchical.llm.prefix_state import PrefixStates, chat_formatter, chat_tokens

pytestmark = pytest.mark.smollm2

SYSTEM = "You turn a request into where the blocks end up. " + " ".join(
    f"Rule {i}: a block named by its colour goes where the request puts it." for i in range(12)
)


def _messages(request: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "put the cyan block on the white block"},
        {"role": "assistant", "content": "on(cyan, white)"},
        {"role": "user", "content": request},
    ]


CHILD = """
import json, sys
from robocompose.hierarchical.llm import LocalLLM
state_dir = sys.argv[1] or None
reply = LocalLLM("smollm2", state_dir=state_dir).chat(json.loads(sys.argv[2]), max_tokens=8)
print(json.dumps([reply.prompt_tokens, reply.prompt_tokens_evaluated, reply.text]))
"""


def _child(state_dir: str, request: str) -> tuple[int, int, str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, state_dir, json.dumps(_messages(request))],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_new_process_evaluates_only_the_request(smollm2_path, tmp_path):
    folder = str(tmp_path / "states")
    total, evaluated, _ = _child(folder, "put the red block on the blue block")
    assert evaluated == total > 200  # the first process evaluates everything and saves
    total, evaluated, text = _child(folder, "stack the green block on the yellow block")
    assert evaluated < 30 < total  # the second loads the fixed part: only the request is new
    assert _child("", "stack the green block on the yellow block")[2] == text  # = a cold run
    assert len(list((tmp_path / "states").glob("*.kvstate"))) == 1


def test_changed_or_damaged_states_are_evaluated_again(smollm2, tmp_path):
    llama = smollm2._llama
    formatter = chat_formatter(llama)
    tokens, n_fixed = chat_tokens(llama, formatter, _messages("put red on blue"))
    states = PrefixStates(tmp_path, smollm2.identity, max_files=1)
    llama.n_tokens = 0
    assert states.warm(llama, tokens, n_fixed) == n_fixed and states.saves == 1
    llama.n_tokens = 0
    assert states.warm(llama, tokens, n_fixed) == 0 and states.loads == 1
    assert states.warm(llama, tokens, n_fixed) == 0 and states.loads == 1  # still held
    path = states.path(tokens[:n_fixed])
    path.write_bytes(b"not a state")
    llama.n_tokens = 0
    with pytest.warns(UserWarning, match="unusable prompt state"):
        assert states.warm(llama, tokens, n_fixed) == n_fixed
    other, n_other = chat_tokens(
        llama,
        formatter,
        [{"role": "system", "content": SYSTEM + " Be brief."}, *_messages("x")[1:]],
    )
    assert states.warm(llama, other, n_other) > 0  # a changed fixed part is not the stored one
    assert list(tmp_path.glob("*.kvstate")) == [states.path(other[:n_other])]  # max_files=1


def test_the_fixed_part_is_everything_before_the_last_message(smollm2):
    llama = smollm2._llama
    formatter = chat_formatter(llama)
    a, n_a = chat_tokens(llama, formatter, _messages("put red on blue"))
    b, n_b = chat_tokens(llama, formatter, _messages("a different request entirely"))
    assert n_a == n_b and a[:n_a] == b[:n_b] and len(a) - n_a < 15
    reply = smollm2.chat(_messages("put red on blue"), max_tokens=4)
    assert reply.prompt_tokens == len(a)
