"""Field descriptions come from the config's source: metadata, trailing or preceding comments."""

from __future__ import annotations

from dataclasses import dataclass, field

from robocompose.config_help import config_fields, field_comments, format_fields


@dataclass
class Inner:
    rate: float = 0.5  # how often


@dataclass
class Base:
    count: int = 3  # how many; a base's comment
    path: str = "a"  # the first line of a comment that goes on;
    # this line continues it
    # Described by the block above it. Only its first sentence counts.
    flag: bool = False
    plain: int = 0


@dataclass(kw_only=True)
class Example(Base):
    name: str  # no default: required
    helped: str = field(default="x", metadata={"help": "metadata wins"})  # not this
    options: dict[str, int] = field(default_factory=dict)
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None


def test_comments_of_own_and_inherited_fields() -> None:
    # `plain`, `options`, `inner` and `maybe` have none
    assert field_comments(Example) == {
        "count": "how many; a base's comment",
        "path": "the first line of a comment that goes on; this line continues it",
        "flag": "Described by the block above it",
        "name": "no default: required",
        "helped": "not this",
    }


def test_fields_with_types_defaults_and_help() -> None:
    fields = {f.key: f for f in config_fields(Example)}
    assert list(fields) == [
        "count", "path", "flag", "plain", "name", "helped", "options",
        "inner", "inner.rate", "maybe", "maybe.rate",
    ]  # fmt: skip
    assert (fields["count"].type, fields["count"].default) == ("int", "3")
    assert fields["name"].default is None
    assert fields["helped"].help == "metadata wins"
    assert fields["options"].help == "takes any keys: +options.KEY=VALUE"
    assert fields["inner"].nested and fields["inner"].default is None
    assert fields["maybe"].default == "null"
    assert fields["inner.rate"].help == "how often"


def test_format_fits_80_columns_and_names_requirements() -> None:
    text = format_fields(config_fields(Example), groups=("inner",))
    assert "  name: str (required)" in text
    assert "  inner: Inner  (group inner/)" in text
    assert "  path: str = 'a'\n      the first line of a comment that goes on; this line" in text
    assert max(len(line) for line in text.splitlines()) <= 80
