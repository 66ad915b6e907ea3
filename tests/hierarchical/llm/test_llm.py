"""LLM backends against real models: local SmolLM2 (llama-cpp-python), the same model behind a
real OpenAI-compatible HTTP server on loopback (`python -m llama_cpp.server`), and the disk cache.
The Qwen test needs the 22 parts; every model test skips with the reason when its extra is
missing."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

from robocompose.hierarchical.llm import LLMConfig, make_backend
from robocompose.hierarchical.llm.cache import CachedLLM, backend_identity
from robocompose.hierarchical.llm.remote import OpenAIBackend

SKILL_SCHEMA = {
    "type": "object",
    "properties": {
        "skill": {"type": "string", "enum": ["pick", "place"]},
        "object": {"type": "string", "enum": ["red", "blue", "green"]},
    },
    "required": ["skill", "object"],
    "additionalProperties": False,
}
SKILL_GRAMMAR = r"""root ::= verb " the " colour " block"
verb ::= "pick" | "place"
colour ::= "red" | "blue" | "green"
"""
ASK = [
    {"role": "system", "content": "You control a robot arm. Answer with one action."},
    {"role": "user", "content": "Pick up the red block."},
]


# ---- configuration and argument checks (no model) ------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"backend": "opnai"},
            r"`backend` must be one of \['local', 'openai'\]. Got 'opnai'. Did you",
        ),
        ({"n_ctx": 64}, r"`n_ctx` must be in \[256, 32768\]. Got 64."),
        ({"n_threads": 0}, r"`n_threads` must be in \[1, \d+\]. Got 0."),
        ({"timeout_s": 0.0}, r"`timeout_s` must be > 0. Got 0.0."),
        ({"schema_format": "xml"}, r"`schema_format` must be one of"),
        ({"base_url": "http://x"}, r"apply to backend=openai only"),
    ],
)
def test_config_names_the_bad_field(fields, message):
    with pytest.raises(ValueError, match=message):
        LLMConfig(**fields)


def test_make_backend_rejects_unknown_settings():
    with pytest.raises(TypeError, match=r"unknown LLM setting 'n_tread'.*Did you mean 'n_threads'"):
        make_backend("local", n_tread=2)


def test_openai_backend_without_endpoint_or_key_says_what_to_set(monkeypatch):
    pytest.importorskip("openai", reason="the openai client is not installed: make setup-all")
    for name in (
        "ROBOCOMPOSE_LLM_BASE_URL",
        "OPENAI_BASE_URL",
        "ROBOCOMPOSE_LLM_API_KEY",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="no endpoint and no API key: set `base_url`"):
        make_backend("openai", model="m", cache=False)


# ---- local SmolLM2 ---------------------------------------------------------------------------


@pytest.mark.smollm2
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"messages": []}, r"`messages` must be a non-empty list"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, r"`messages\[0\].role` must be one"),
        ({"messages": [{"role": "user"}]}, r"`messages\[0\]` must be a dict with exactly"),
        ({"messages": ASK, "max_tokens": 0}, r"`max_tokens` must be an int >= 1. Got 0."),
        ({"messages": ASK, "temperature": -1.0}, r"`temperature` must be in \[0, 2\]"),
        ({"messages": ASK, "grammar": "root ::= x", "json_schema": {}}, "not both"),
        ({"messages": ASK, "grammar": "root ::= (("}, "`grammar` is not valid GBNF: expecting"),
        ({"messages": ASK, "grammar": "root ::= x"}, "Undefined rule identifier 'x'"),
        ({"messages": ASK, "grammar": 'plan ::= "a"'}, "A grammar needs a `root` rule"),
        ({"messages": ASK, "json_schema": {"type": "frob"}}, "`json_schema` cannot be turned"),
        ({"messages": ASK, "stop": "\n"}, "`stop` must be a sequence of non-empty strings"),
    ],
)
def test_bad_chat_arguments_are_named(smollm2, kwargs, message):
    with pytest.raises(ValueError, match=message):
        smollm2.chat(**kwargs)


@pytest.mark.smollm2
def test_local_chat_reports_tokens_time_and_model(smollm2):
    reply = smollm2.chat(ASK, max_tokens=24)
    assert reply.text.strip()
    assert reply.prompt_tokens > 10 and 0 < reply.completion_tokens <= 24
    assert reply.seconds > 0 and reply.model == "smollm2" and not reply.cached
    assert reply.finish_reason in ("stop", "length")
    assert smollm2.chat(ASK, max_tokens=24).text == reply.text  # temperature 0: greedy
    assert smollm2.chat(ASK, max_tokens=1).finish_reason == "length"


@pytest.mark.smollm2
def test_make_backend_caches_and_loads_a_model_once_per_process(smollm2, tmp_path):
    llm = make_backend("local", model="smollm2", cache_dir=str(tmp_path))
    assert isinstance(llm, CachedLLM) and llm.folder == tmp_path
    assert llm.backend._llama is smollm2._llama  # the session's model, not a second copy
    assert llm.identity == smollm2.identity and "seed=0" in llm.identity
    assert make_backend("local", model="smollm2", cache=False) is not smollm2


@pytest.mark.smollm2
def test_grammar_constrains_the_output(smollm2):
    reply = smollm2.chat(ASK, max_tokens=16, grammar=SKILL_GRAMMAR)
    assert re.fullmatch(r"(pick|place) the (red|blue|green) block", reply.text), reply.text


@pytest.mark.smollm2
def test_json_schema_output_parses_and_validates(smollm2):
    jsonschema = pytest.importorskip("jsonschema")
    reply = smollm2.chat(ASK, max_tokens=48, json_schema=SKILL_SCHEMA)
    jsonschema.validate(json.loads(reply.text), SKILL_SCHEMA)


@pytest.mark.smollm2
def test_score_prefers_the_likely_continuation(smollm2):
    likely, unlikely = smollm2.score("one, two, three, four,", [" five", " purple"])
    assert likely > unlikely and likely < 0 and unlikely < 0


def manual_scores(model_path, prompt, continuations, **overrides) -> list[float]:
    """The reference: a separate context that keeps every position's logits (`logits_all`),
    the whole sequence evaluated at once, log-softmax summed over the continuation's tokens."""
    import llama_cpp

    reference = llama_cpp.Llama(
        model_path=str(model_path),
        n_ctx=256,
        logits_all=True,
        verbose=False,
        n_threads=2,
        kv_overrides=overrides or None,
    )
    sums = []
    for continuation in continuations:
        p = reference.tokenize(prompt.encode(), add_bos=True)
        c = reference.tokenize(continuation.encode(), add_bos=False)
        reference.reset()
        reference.eval(p + c)
        logits = reference.scores[len(p) - 1 : len(p) + len(c) - 1].astype(np.float64)
        logprobs = logits - logits.max(1, keepdims=True)
        logprobs -= np.log(np.exp(logprobs).sum(1, keepdims=True))
        sums.append(float(logprobs[np.arange(len(c)), c].sum()))
    reference.close()
    return sums


@pytest.mark.smollm2
def test_score_equals_a_manual_sum_over_all_logits(smollm2, smollm2_path):
    prompt = "The robot picks up the red block and"
    continuations = [" places it on the blue block", " stops"]
    got = smollm2.score(prompt, continuations)
    # token-by-token decoding and one batch differ only by float rounding
    assert got == pytest.approx(manual_scores(smollm2_path, prompt, continuations), abs=0.05)
    # the order of the candidates and the context's earlier content do not matter
    assert smollm2.score(prompt, continuations[::-1]) == pytest.approx(got[::-1], abs=1e-4)


@pytest.mark.smollm2
def test_chat_after_score_is_unchanged(smollm2):
    before = smollm2.chat(ASK, max_tokens=12).text
    smollm2.score("Pick up the", [" red", " blue block"])
    assert smollm2.chat(ASK, max_tokens=12).text == before


@pytest.mark.smollm2
def test_score_rejects_empty_input(smollm2):
    with pytest.raises(ValueError, match=r"`continuations\[1\]` must be a non-empty string"):
        smollm2.score("a", [" b", ""])


# ---- disk cache ------------------------------------------------------------------------------


@pytest.mark.smollm2
def test_cache_hit_returns_the_stored_completion(cached_smollm2):
    first = cached_smollm2.chat(ASK, max_tokens=16)
    second = cached_smollm2.chat(ASK, max_tokens=16)
    assert not first.cached and second.cached
    assert (second.text, second.prompt_tokens, second.completion_tokens, second.seconds) == (
        first.text,
        first.prompt_tokens,
        first.completion_tokens,
        first.seconds,
    )
    assert (cached_smollm2.hits, cached_smollm2.misses) == (1, 1)
    cached_smollm2.chat(ASK, max_tokens=17)  # any setting in the key is a new entry
    cached_smollm2.chat(ASK, max_tokens=16, grammar=SKILL_GRAMMAR)
    cached_smollm2.chat(ASK, max_tokens=16, temperature=0.5)
    cached_smollm2.chat(ASK, max_tokens=16, stop=["."])
    cached_smollm2.chat([{"role": "system", "content": "Be brief."}, ASK[-1]], max_tokens=16)
    cached_smollm2.chat([*ASK, {"role": "assistant", "content": "Red"}], max_tokens=16)
    assert (cached_smollm2.hits, cached_smollm2.misses) == (1, 7)
    assert len(list(cached_smollm2.folder.rglob("*.json"))) == 7


def test_the_remote_sampling_seed_is_part_of_the_cache_key():
    pytest.importorskip("openai", reason="the openai client is not installed: make setup-all")
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing is asked of it: the model is named
    seeds = [OpenAIBackend("m", base_url=url, seed=s) for s in (0, 1, None)]
    assert len({backend_identity(b) for b in seeds}) == 3


@pytest.mark.smollm2
def test_cache_survives_a_new_process_and_covers_score(smollm2, tmp_path):
    a = CachedLLM(smollm2, tmp_path)
    scores = a.score("one, two,", [" three", " green"])
    b = CachedLLM(smollm2, tmp_path)  # a fresh wrapper reads what the first wrote
    assert b.score("one, two,", [" three", " green"]) == scores and b.hits == 1
    assert b.chat(ASK, max_tokens=8).text == a.chat(ASK, max_tokens=8).text
    assert b.misses == 1 and a.hits == 1


@pytest.mark.smollm2
def test_an_unreadable_entry_is_recomputed(cached_smollm2):
    first = cached_smollm2.chat(ASK, max_tokens=8)
    (entry,) = cached_smollm2.folder.rglob("*.json")
    entry.write_text("{ truncated")
    with pytest.warns(UserWarning, match="unreadable LLM cache entry"):
        again = cached_smollm2.chat(ASK, max_tokens=8)
    assert again.text == first.text and not again.cached
    assert json.loads(entry.read_text())["completion"]["text"] == first.text


# ---- OpenAI-compatible backend against a real llama.cpp server -------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model_path, log, *extra: str) -> Iterator[str]:
    """`python -m llama_cpp.server` serving `model_path` on a free loopback port, up once
    `/v1/models` answers; yields the base URL and stops the server on exit."""
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", *extra]
    with log.open("w") as out:
        env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({process.returncode}): {log.read_text()}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer in 120 s: {log.read_text()}")
                time.sleep(0.5)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def server(smollm2_path, tmp_path_factory):
    """SmolLM2 behind a real OpenAI-compatible server on loopback; its base URL."""
    pytest.importorskip("openai", reason="the openai client is not installed: make setup-all")
    pytest.importorskip("uvicorn", reason="llama-cpp-python[server] is not installed")
    with serve(smollm2_path, tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def remote(server):
    backend = make_backend("openai", base_url=server, cache=False)
    yield backend
    backend.client.close()


@pytest.mark.smollm2
def test_remote_chat_matches_the_local_model(remote, smollm2):
    reply = remote.chat(ASK, max_tokens=16)
    assert reply.text == smollm2.chat(ASK, max_tokens=16).text  # same weights, greedy
    assert reply.prompt_tokens > 10 and reply.completion_tokens > 0 and reply.seconds > 0
    assert reply.model.endswith(".gguf")  # the server's only model, found through /v1/models


@pytest.mark.smollm2
def test_remote_json_schema_and_grammar_constrain_the_output(remote):
    jsonschema = pytest.importorskip("jsonschema")
    reply = remote.chat(ASK, max_tokens=48, json_schema=SKILL_SCHEMA)
    jsonschema.validate(json.loads(reply.text), SKILL_SCHEMA)
    assert remote.schema_format == "json_object"  # this server refused the OpenAI form once
    reply = remote.chat(ASK, max_tokens=16, grammar=SKILL_GRAMMAR)
    assert re.fullmatch(r"(pick|place) the (red|blue|green) block", reply.text), reply.text


@pytest.mark.smollm2
def test_remote_score_equals_the_manual_sum(smollm2_path, tmp_path):
    """llama-cpp-python's server aligns echoed log-probs only for models that start with a BOS
    token; SmolLM2 adds none, so this server and the reference both get one by override."""
    pytest.importorskip("uvicorn", reason="llama-cpp-python[server] is not installed")
    bos = "tokenizer.ggml.add_bos_token"
    prompt, continuations = "one, two, three, four,", [" five", " purple", " five, six"]
    with serve(smollm2_path, tmp_path / "log", "--kv_overrides", f"{bos}=bool:true") as url:
        llm = make_backend("openai", base_url=url, cache=False)
        got = llm.score(prompt, continuations)
        llm.client.close()
    assert got[0] > got[1]
    expected = manual_scores(smollm2_path, prompt, continuations, **{bos: True})
    assert got == pytest.approx(expected, abs=0.05)


@pytest.mark.smollm2
def test_remote_through_the_cache_with_the_endpoint_from_the_environment(
    server, tmp_path, monkeypatch
):
    monkeypatch.setenv("ROBOCOMPOSE_LLM_BASE_URL", server)
    llm = make_backend("openai", cache_dir=str(tmp_path))
    first, second = llm.chat(ASK, max_tokens=8), llm.chat(ASK, max_tokens=8)
    assert not first.cached and second.cached and second.text == first.text
    assert llm.identity.startswith(f"openai:{server}:")


def test_an_unreachable_server_is_a_clear_error():
    pytest.importorskip("openai", reason="the openai client is not installed: make setup-all")
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ConnectionError, match=f"cannot list the models of {re.escape(url)}"):
        make_backend("openai", base_url=url, cache=False, timeout_s=5.0)
    llm = make_backend("openai", base_url=url, model="m", cache=False, timeout_s=5.0)
    with pytest.raises(ConnectionError, match=f"cannot reach {re.escape(url)}"):
        llm.chat(ASK, max_tokens=4)


# ---- Qwen2.5-Coder-1.5B: the default planner model -----------------------------------------

API = '''from robot import pick, place_on

def pick(block: str) -> None:
    """Grasp the block of that colour and lift it."""

def place_on(block: str) -> None:
    """Put the held block on top of the block of that colour."""
'''
EXAMPLE = (
    "Instruction: put the red block on the green block.\nProgram:\npick('red')\nplace_on('green')\n"
)


@pytest.mark.qwen
def test_qwen_writes_the_two_step_stacking_program(qwen):
    messages = [
        {
            "role": "system",
            "content": "You write Python programs for a robot using only this "
            "API. Reply with the program only, no explanation.\n" + API + "\n" + EXAMPLE,
        },
        {
            "role": "user",
            "content": "Instruction: stack the blue block on the red block, then "
            "put the green block on the blue block.\nProgram:",
        },
    ]
    reply = qwen.chat(messages, max_tokens=96)
    code = reply.text.strip().removeprefix("```python").removesuffix("```").strip()
    calls = [
        (node.func.id, node.args[0].value)
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    assert calls == [
        ("pick", "blue"),
        ("place_on", "red"),
        ("pick", "green"),
        ("place_on", "blue"),
    ], code
    assert reply.model == "qwen2.5-coder-1.5b" and reply.completion_tokens > 0
