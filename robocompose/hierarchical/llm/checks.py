"""Argument checks every backend runs before calling a model, so bad input fails the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from robocompose.hierarchical.base import Message

ROLES = ("system", "user", "assistant")


def check_chat_args(
    messages: Sequence[Message],
    max_tokens: int,
    temperature: float,
    grammar: str | None,
    json_schema: dict[str, Any] | None,
    stop: Sequence[str],
) -> None:
    """Raise ValueError naming the first bad argument of `LLMBackend.chat`."""
    if isinstance(messages, str | dict) or not messages:
        raise ValueError(
            "`messages` must be a non-empty list of {'role': ..., 'content': ...} dicts. "
            f"Got {messages!r:.80}."
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise ValueError(
                f"`messages[{i}]` must be a dict with exactly the keys 'role' and 'content'. "
                f"Got {message!r:.80}."
            )
        if message["role"] not in ROLES:
            raise ValueError(
                f"`messages[{i}].role` must be one of {ROLES}. Got {message['role']!r}."
            )
        if not isinstance(message["content"], str):
            raise ValueError(
                f"`messages[{i}].content` must be a string. "
                f"Got {type(message['content']).__name__}."
            )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"`max_tokens` must be an int >= 1. Got {max_tokens!r}.")
    if not 0.0 <= temperature <= 2.0:
        raise ValueError(f"`temperature` must be in [0, 2]. Got {temperature}.")
    if grammar is not None and json_schema is not None:
        raise ValueError("give `grammar` or `json_schema`, not both: each constrains the output.")
    if grammar is not None and (not isinstance(grammar, str) or not grammar.strip()):
        raise ValueError(f"`grammar` must be a non-empty GBNF string. Got {grammar!r:.80}.")
    if json_schema is not None and not isinstance(json_schema, dict):
        raise ValueError(f"`json_schema` must be a dict. Got {type(json_schema).__name__}.")
    if isinstance(stop, str) or not all(isinstance(s, str) and s for s in stop):
        raise ValueError(f"`stop` must be a sequence of non-empty strings. Got {stop!r:.80}.")


def check_score_args(prompt: str, continuations: Sequence[str]) -> None:
    """Raise ValueError naming the first bad argument of `LLMBackend.score`."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"`prompt` must be a non-empty string. Got {prompt!r:.80}.")
    if isinstance(continuations, str) or not continuations:
        raise ValueError(
            f"`continuations` must be a non-empty list of strings. Got {continuations!r:.80}."
        )
    for i, text in enumerate(continuations):
        if not isinstance(text, str) or not text:
            raise ValueError(f"`continuations[{i}]` must be a non-empty string. Got {text!r:.80}.")
