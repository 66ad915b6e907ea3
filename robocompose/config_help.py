"""What `robocompose <verb> --help` says about a verb's config: every field of its dataclass,
nested ones as dotted keys, with type, default and the description its source already gives.

The description is `field(metadata={"help": ...})` when set, else the field's `# comment`: the
comment at the end of its line (continued on the next comment line when it ends with `;` or
`,`), or else the first sentence of the comment block right above it. A field declared with
`robocompose.choices.one_of` (or `each_of`) lists its names too. The help text is read from the
source, never written twice.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import textwrap
import tokenize
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robocompose.choices import choices_of

WIDTH = 80  # a terminal's columns
INDENT = 6  # of a description under its key
CONTINUED = (";", ",", "(")  # a trailing comment ending so goes on to the next comment line


@dataclass(frozen=True)
class FieldHelp:
    """One line of the listing: a config key and what `--help` says of it."""

    key: str  # dotted: "composition.weights"
    type: str  # as annotated: "list[str]", "int | None"
    default: str | None  # in override grammar; None: required (or a nested config)
    help: str = ""
    nested: bool = False  # a config of its own: its fields follow as `key.<field>`
    choices: tuple[str, ...] = ()  # the names it takes (`robocompose.choices.one_of`)


def config_fields(cls: type, prefix: str = "") -> list[FieldHelp]:
    """Every field of the dataclass `cls`, depth first; nested dataclass configs (also optional
    ones, `X | None`) are followed by their own fields."""
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nested = _nested_config(hint)
        described = f.metadata.get("help") or comments.get(f.name, "")
        if _is_free_mapping(hint):
            described = _joined(described, f"takes any keys: +{prefix}{f.name}.KEY=VALUE")
        choices = tuple(choices_of(f) or ())
        if choices:
            each = "each " if f.metadata.get("each") else ""
            described = _joined(described, f"{each}one of: {', '.join(choices)}")
        key, type_text = prefix + f.name, _type_text(f.type)
        out.append(FieldHelp(key, type_text, _default(f), described, bool(nested), choices))
        if nested is not None:
            out.extend(config_fields(nested, f"{prefix}{f.name}."))
    return out


def _joined(text: str, more: str) -> str:
    return f"{text}; {more}" if text else more


def format_fields(fields: list[FieldHelp], groups: tuple[str, ...] = ()) -> str:
    """One line `key: type = default` per field (or `(required)`), its description below it,
    wrapped to the terminal; the fields of a config group say where their values come from."""
    lines = []
    for f in fields:
        group = f.key.split(".")[0] if f.key.split(".")[0] in groups else None
        if f.nested:
            head = f"{f.key}: {f.type}" + (f" = {f.default}" if f.default else "")
            if group and "." not in f.key:
                head += f"  (group {group}/)"
        elif f.default is not None:
            head = f"{f.key}: {f.type} = {f.default}"
        else:
            head = f"{f.key}: {f.type} ({f'from {group}/' if group else 'required'})"
        lines.append(wrap(head, 2, 4))
        if f.help:
            lines.append(wrap(f.help, INDENT))
    return "\n".join(lines)


def wrap(text: str, indent: int = 0, hanging: int | None = None) -> str:
    """`text` in lines of at most WIDTH columns, indented (the lines after the first by
    `hanging`, default `indent`)."""
    first, rest = " " * indent, " " * (indent if hanging is None else hanging)
    return "\n".join(textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest))


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> its comment, from the class that declares the field (a base's fields are
    described where the base writes them)."""
    out: dict[str, str] = {}
    for owner in reversed(cls.__mro__):
        if dataclasses.is_dataclass(owner):
            out |= _own_comments(owner)
    return out


@functools.cache
def _own_comments(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source file (a class built at run time)
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    comments = _comment_lines(source)
    out = {}
    continued: set[int] = set()  # comment lines that continue the field above them
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        end = node.end_lineno or node.lineno
        trailing = [
            text
            for line, (text, alone) in comments.items()
            if node.lineno <= line <= end and not alone
        ]
        line = end + 1
        while trailing and trailing[-1].endswith(CONTINUED) and comments.get(line, ("", False))[1]:
            trailing.append(comments[line][0])
            continued.add(line)
            line += 1
        above = []
        line = node.lineno - 1
        while line in comments and comments[line][1] and line not in continued:
            above.insert(0, comments[line][0])
            line -= 1
        text = " ".join(trailing) or _first_sentence(" ".join(above))
        if text:
            out[node.target.id] = text
    return out


def _comment_lines(source: str) -> dict[int, tuple[str, bool]]:
    """Line number -> (the comment's text, whether the comment is alone on its line)."""
    comments = {}
    code_lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line = token.start[0]
            comments[line] = (token.string.lstrip("#").strip(), line not in code_lines)
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    return comments


ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf")


def _first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence: not one inside brackets, nor one of an
    abbreviation ("e.g. 'parent0'" goes on)."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        ends = char == "." and depth == 0 and text[i + 1 : i + 2] in ("", " ")
        if ends and not text[:i].endswith(ABBREVIATIONS):
            return text[:i]
    return text


def _nested_config(hint: Any) -> type | None:
    """The dataclass a field holds: `X` or `X | None` (or `X | str`) with X a dataclass."""
    if dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        configs = [a for a in typing.get_args(hint) if dataclasses.is_dataclass(a)]
        return configs[0] if len(configs) == 1 else None
    return None


def _is_free_mapping(hint: Any) -> bool:
    return typing.get_origin(hint) in (dict, Mapping)


def _default(f: dataclasses.Field) -> str | None:
    from robocompose.config import hydra_value

    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    return None if dataclasses.is_dataclass(value) else hydra_value(value)


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
