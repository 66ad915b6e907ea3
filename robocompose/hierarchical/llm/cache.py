"""Completions and scores cached on disk, so reruns of a plan are reproducible and cheap.

The key is the sha256 of everything that decides the output: the backend's identity (kind, model
and a hash of the model file or the endpoint), the messages, max_tokens, temperature, grammar,
JSON schema and stop strings (for `score`: the prompt and continuations). Each entry is one JSON
file, `<folder>/<key[:2]>/<key>.json`, written to a temporary file and renamed, so a crash never
leaves half an entry and concurrent runs may share a folder. A hit returns the stored completion
with `cached=True` and the token counts and seconds of the call that made it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robocompose.hierarchical.base import Completion, LLMBackend, Message

FORMAT_VERSION = 1


def default_cache_dir() -> Path:
    """`$ROBOCOMPOSE_LLM_CACHE`, else `~/.cache/robocompose/llm`."""
    env = os.environ.get("ROBOCOMPOSE_LLM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "robocompose" / "llm"


def backend_identity(backend: LLMBackend) -> str:
    """What names a backend's outputs: its `identity` when it has one, else class and model."""
    return getattr(backend, "identity", None) or f"{type(backend).__name__}:{backend.model}"


class CachedLLM(LLMBackend):
    """`backend` behind a disk cache; the same interface, so planners never know. Arguments are
    checked by the backend on a miss; a request that failed was never stored."""

    def __init__(self, backend: LLMBackend, folder: str | os.PathLike[str] | None = None) -> None:
        self.backend = backend
        self.model = backend.model
        self.identity = backend_identity(backend)
        self.folder = default_cache_dir() if folder is None else Path(folder).expanduser()
        self.hits = 0
        self.misses = 0

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
        request = {
            "call": "chat",
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "grammar": grammar,
            "json_schema": json_schema,
            "stop": list(stop),
        }
        path = self._path(request)
        stored = self._read(path)
        if stored is not None:
            self.hits += 1
            return Completion(**{**stored["completion"], "cached": True})
        self.misses += 1
        completion = self.backend.chat(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            grammar=grammar,
            json_schema=json_schema,
            stop=stop,
        )
        fields = {**dataclasses.asdict(completion), "cached": False}
        self._write(path, {"request": request, "completion": fields})
        return completion

    def score(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        request = {"call": "score", "prompt": prompt, "continuations": list(continuations)}
        path = self._path(request)
        stored = self._read(path)
        if stored is not None:
            self.hits += 1
            return list(stored["scores"])
        self.misses += 1
        scores = self.backend.score(prompt, continuations)
        self._write(path, {"request": request, "scores": scores})
        return scores

    def _path(self, request: dict[str, Any]) -> Path:
        blob = json.dumps(
            {"version": FORMAT_VERSION, "backend": self.identity, **request},
            sort_keys=True,
            ensure_ascii=False,
        )
        key = hashlib.sha256(blob.encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            warnings.warn(
                f"unreadable LLM cache entry {path} ({error}): calling the model again",
                stacklevel=3,
            )
            return None

    def _write(self, path: Path, entry: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"backend": self.identity, **entry}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f, ensure_ascii=False, indent=1)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
