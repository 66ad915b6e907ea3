"""An offline GGUF model through llama-cpp-python: chat with grammar or JSON-schema constrained
output, and continuation scoring from the model's own logits."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.hierarchical.base import Completion, LLMBackend, Message
from robocompose.hierarchical.llm.checks import check_chat_args, check_score_args
from robocompose.hierarchical.llm.models import (
    DEFAULT_MODEL,
    JOINED,
    MODEL_NAMES,
    ModelError,
    resolve_model,
)
from robocompose.hierarchical.llm.prefix_state import (
    PrefixStates,
    chat_formatter,
    chat_tokens,
    common_prefix,
    held_tokens,
)

FINGERPRINT_BYTES = 1 << 20

# llama.cpp's OpenMP threads spin while they wait, by default; on a shared machine (more busy
# threads than cores) that made decoding 5-40x slower here, and passive waiting costs little on
# an idle one. OpenMP reads this once, when llama_cpp first loads: so here, at import, before any
# backend loads it. An explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# A cap on every model's llama.cpp threads, whatever its caller asked for: llama.cpp's threads
# wait for each other at every layer, so two models with two threads each on two cores stall each
# other several-fold instead of sharing them. A job that runs several models side by side (the
# test suite, one per pytest-xdist worker) sets it to its share of the cores.
THREADS_ENV = "ROBOCOMPOSE_LLM_THREADS"

# (path, n_ctx, n_threads, seed, adapter) -> (Llama, the lock every user of that Llama takes)
_LOADED: dict[tuple[str, int, int, int, str], tuple[Any, threading.Lock]] = {}
_LOAD_LOCK = threading.Lock()


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as error:
        raise ImportError(
            "the local LLM backend needs llama-cpp-python: run `make setup-all` (it builds it "
            f"portable; the default native build crashes on some CPUs). ({error})"
        ) from None
    return llama_cpp


def thread_cap() -> int | None:
    """`$ROBOCOMPOSE_LLM_THREADS` as a positive int, None when unset."""
    value = os.environ.get(THREADS_ENV, "")
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"${THREADS_ENV} must be a positive integer. Got {value!r}.")
    return int(value)


def load_llama(
    path: Path, n_ctx: int, n_threads: int, seed: int, lora: Path | None = None
) -> tuple[Any, threading.Lock]:
    """One `llama_cpp.Llama` per (file, settings, adapter) per process, loading costs seconds;
    with the lock that serialises its calls (one context holds one conversation at a time).
    `n_threads` is held to `thread_cap()`."""
    n_threads = min(n_threads, thread_cap() or n_threads)
    key = (str(path), n_ctx, n_threads, seed, str(lora or ""))
    with _LOAD_LOCK:
        if key not in _LOADED:
            llama_cpp = _llama_cpp()
            # llama.cpp reports each adapter tensor's buffer fallback on stderr, verbose or not
            with _stderr_captured() if lora is not None else contextlib.nullcontext():
                llama = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,
                    seed=seed,
                    lora_path=None if lora is None else str(lora),
                    verbose=False,
                )
            _LOADED[key] = (llama, threading.Lock())
        return _LOADED[key]


@atexit.register
def _close_loaded() -> None:
    """Free the models before the interpreter tears down the modules their finalizers need."""
    for llama, _ in _LOADED.values():
        llama.close()
    _LOADED.clear()


@contextlib.contextmanager
def _stderr_captured() -> Iterator[Callable[[], list[str]]]:
    """Capture what C code writes to file descriptor 2 (llama.cpp's grammar parser reports its
    errors there); yields a function returning the captured lines."""
    lines: list[str] = []
    with tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").split("\n"))


def schema_grammar(json_schema: dict[str, Any]) -> str:
    """The GBNF grammar of a JSON schema, by llama-cpp-python's converter (what its
    `response_format={"type": "json_object", "schema": ...}` uses). That path falls back to "any
    JSON" when the converter fails; here the failure is an error, so the schema always holds."""
    _llama_cpp()
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return json_schema_to_gbnf(json.dumps(json_schema))
    except Exception as error:  # the converter raises bare Exceptions and KeyErrors
        raise ValueError(
            f"`json_schema` cannot be turned into a grammar ({type(error).__name__}: {error}); "
            "use the subset of JSON Schema llama.cpp supports (type, properties, required, "
            "items, enum, const, anyOf, min/maxItems, pattern)."
        ) from None


def fingerprint(path: Path) -> str:
    """A cheap identity for a model file: the size and sha256 of its first and last MiB."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        digest.update(f.read(FINGERPRINT_BYTES))
        f.seek(max(0, size - FINGERPRINT_BYTES))
        digest.update(f.read(FINGERPRINT_BYTES))
    return digest.hexdigest()


class LocalLLM(LLMBackend):
    """A local GGUF model. `model` is a name from `models.MODEL_NAMES` or a path to a .gguf file.

    With `state_dir`, the KV state of each chat prompt's fixed part (all but the last message's
    text) is kept on disk there (`prefix_state`), so a new process evaluates only the request;
    every completion reports `prompt_tokens_evaluated`. `lora`: a llama.cpp LoRA adapter file
    applied on top of the model (`hierarchical.adapter.train` trains one)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        n_ctx: int = 4096,
        n_threads: int = 2,
        seed: int = 0,
        state_dir: str | os.PathLike[str] | None = None,
        lora: str | os.PathLike[str] | None = None,
    ) -> None:
        if n_ctx < 256:
            raise ValueError(f"`n_ctx` must be >= 256. Got {n_ctx}.")
        if n_threads < 1:
            raise ValueError(f"`n_threads` must be >= 1. Got {n_threads}.")
        self.path = resolve_model(model)
        self.model = str(model) if str(model) in MODEL_NAMES else self.path.name
        self.seed = seed
        self.n_ctx = n_ctx
        named = JOINED.get(str(model))
        file_id = named.sha256 if named else fingerprint(self.path)
        self.identity = f"local:{self.model}:{file_id}:seed={seed}"
        self.lora = None if lora is None else Path(lora).expanduser().resolve()
        if self.lora is not None:
            if not self.lora.is_file():
                raise ModelError(f"LoRA adapter file {self.lora} does not exist.")
            self.identity += f":lora={fingerprint(self.lora)}"
        self._llama, self._lock = load_llama(self.path, n_ctx, n_threads, seed, self.lora)
        self._formatter = chat_formatter(self._llama)
        self.prefix_states = (
            PrefixStates(state_dir, self.identity)
            if state_dir is not None and self._formatter is not None
            else None
        )

    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        grammar: str | None = None,
        json_schema: dict[str, Any] | None = None,
        stop: Sequence[str] = (),
    ) -> Completion:
        check_chat_args(messages, max_tokens, temperature, grammar, json_schema, stop)
        if json_schema is not None:
            grammar = schema_grammar(json_schema)
        kwargs: dict[str, Any] = {}
        with self._lock:
            if grammar is not None:
                kwargs["grammar"] = self._grammar(grammar)
            start = time.perf_counter()
            evaluated = self._warm(messages)
            response = self._llama.create_chat_completion(
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens,
                temperature=temperature,
                stop=list(stop),
                seed=self.seed,
                **kwargs,
            )
            seconds = time.perf_counter() - start
        choice = response["choices"][0]
        usage = response["usage"]
        return Completion(
            text=choice["message"]["content"] or "",
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            seconds=seconds,
            model=self.model,
            finish_reason=choice.get("finish_reason") or "",
            prompt_tokens_evaluated=evaluated,
        )

    def _warm(self, messages: Sequence[Message]) -> int | None:
        """Bring the prompt's fixed part into the context (kept, loaded from disk, or evaluated
        and saved); returns the prompt tokens this call evaluates in all (None when the chat
        format is not the GGUF's template, so the prompt's tokens are not known here)."""
        if self._formatter is None:
            return None
        tokens, n_fixed = chat_tokens(self._llama, self._formatter, messages)
        evaluated = (
            self.prefix_states.warm(self._llama, tokens, n_fixed) if self.prefix_states else 0
        )
        # create_chat_completion keeps the longest held prefix and evaluates at least the last token
        kept = min(common_prefix(held_tokens(self._llama), tokens), len(tokens) - 1)
        return evaluated + len(tokens) - kept

    def _grammar(self, grammar: str) -> Any:
        """A `LlamaGrammar` that llama.cpp's own parser accepted: `LlamaGrammar` does not parse,
        and llama.cpp crashes the process when it samples with a grammar that failed to."""
        llama_cpp = _llama_cpp()
        vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        with _stderr_captured() as said:
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not sampler:
            marker = "error parsing grammar:"
            why = [line.split(marker, 1)[1].strip() for line in said() if marker in line]
            raise ValueError(
                f"`grammar` is not valid GBNF: {why[0] if why else 'llama.cpp rejected it'}. "
                "A grammar needs a `root` rule and must define every rule it uses."
            )
        llama_cpp.llama_sampler_free(sampler)
        return llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)

    def score(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Sum of log p(token | prompt, earlier continuation tokens) over each continuation.

        The prompt is tokenized with the model's start token (if it has one), each continuation
        on its own, so a continuation should begin at a token boundary (" pick up the red block",
        or anything after a newline). The prompt is evaluated once, reusing what the context
        already holds; then each continuation in one decode that keeps every position's logits."""
        check_score_args(prompt, continuations)
        llama = self._llama
        with self._lock:
            prompt_tokens = llama.tokenize(prompt.encode(), add_bos=True, special=False)
            cont_tokens = [
                llama.tokenize(c.encode(), add_bos=False, special=False) for c in continuations
            ]
            longest = len(prompt_tokens) + max(len(t) for t in cont_tokens)
            if longest > self.n_ctx:
                raise ValueError(
                    f"prompt + continuation take {longest} tokens; the context holds {self.n_ctx} "
                    "(raise `n_ctx`)."
                )
            self._eval_prefix(prompt_tokens)
            after_prompt = _log_softmax(self._logits(-1))
            scores = [
                float(after_prompt[tokens[0]]) + self._logprob_after(len(prompt_tokens), tokens)
                for tokens in cont_tokens
            ]
            # drop the continuations: the context ends at the prompt, its logits the prompt's
            llama.n_tokens = len(prompt_tokens) - 1
            llama.eval(prompt_tokens[-1:])
        return scores

    def _eval_prefix(self, tokens: list[int]) -> None:
        """Evaluate `tokens`, keeping the longest prefix the context already holds (at least the
        last token is evaluated again, for its logits)."""
        llama = self._llama
        held = list(llama.input_ids[: llama.n_tokens])
        keep = 0
        for a, b in zip(held, tokens, strict=False):
            if a != b:
                break
            keep += 1
        llama.n_tokens = min(keep, len(tokens) - 1)
        llama.eval(tokens[llama.n_tokens :])

    def _logprob_after(self, start: int, tokens: list[int]) -> float:
        """log p(tokens[1:] | the context's first `start` positions, tokens[0]): `tokens[:-1]`
        decoded at positions start.. in one batch with logits kept for every position. The
        context's bookkeeping (`n_tokens`) is left at `start`; `score` restores its state."""
        inputs = tokens[:-1]
        if not inputs:
            return 0.0
        llama_cpp = _llama_cpp()
        ctx = self._llama.ctx
        batch = llama_cpp.llama_batch_init(len(inputs), 0, 1)
        try:
            for i, token in enumerate(inputs):
                batch.token[i] = token
                batch.pos[i] = start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1
            batch.n_tokens = len(inputs)
            llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, start, -1)
            status = llama_cpp.llama_decode(ctx, batch)
            if status != 0:
                raise RuntimeError(f"llama.cpp could not decode a continuation (status {status}).")
            return sum(
                float(_log_softmax(self._logits(i))[token]) for i, token in enumerate(tokens[1:])
            )
        finally:
            llama_cpp.llama_batch_free(batch)

    def _logits(self, i: int) -> np.ndarray:
        """The logits of output row `i` of the last decode (-1: the last row), as float64."""
        pointer = _llama_cpp().llama_get_logits_ith(self._llama.ctx, i)
        return np.ctypeslib.as_array(pointer, shape=(self._llama.n_vocab(),)).astype(np.float64)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())
