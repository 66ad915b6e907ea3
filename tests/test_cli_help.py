"""`robocompose <verb> --help` lists every field of the verb's config, readable at 80 columns."""

from __future__ import annotations

import dataclasses
import types
import typing

import pytest

from robocompose.cli import VERBS, main
from robocompose.config_help import config_fields


def dotted_keys(cls: type, prefix: str = "") -> list[str]:
    """Every field of a dataclass config; nested configs (also `X | None`) by dotted key."""
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        keys.append(prefix + f.name)
        hint = hints[f.name]
        options = typing.get_args(hint) if typing.get_origin(hint) is types.UnionType else (hint,)
        nested = [o for o in options if dataclasses.is_dataclass(o)]
        if nested:
            keys.extend(dotted_keys(nested[0], f"{prefix}{f.name}."))
    return keys


def help_text(verb: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def terminal_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


@pytest.mark.parametrize("verb", list(VERBS))
def test_help_lists_every_config_field(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(verb, capsys)
    listed = {line.strip().split(":")[0] for line in text.split("config fields")[1].splitlines()}
    missing = [k for k in dotted_keys(VERBS[verb].config_class()) if k not in listed]
    assert not missing, f"`robocompose {verb} --help` does not list {missing}"
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide


def test_help_gives_type_default_and_the_source_comment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_text("compose", capsys)
    # EpisodesConfig's trailing comment, under its key
    assert "  seed_start: int = 100000\n      far from the demonstration seeds (0, 1, ...)" in text
    assert "  composition.sampler_kwargs: dict[str, Any] = {}\n" in text
    assert "takes any keys: +composition.sampler_kwargs.KEY=VALUE" in text
    assert "  task.name: str (from task/)" in text  # a group sets it, not the command line
    assert "  checkpoint: str (required)" in help_text("eval", capsys)


def test_plan_lists_and_takes_only_the_long_horizon_tasks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    groups = help_text("plan", capsys).split("config groups (group=option):")[1]
    assert groups.split() == ["task:", "SortBins,", "Stack"]
    with pytest.raises(SystemExit, match=r"`task` must be one of \['Stack', 'SortBins'\]"):
        main(["plan", "task=PushT", "stack them"])


def described(text: str) -> dict[str, str]:
    """Each listed key -> its description, the wrapped lines joined."""
    fields = text.split("config fields")[1].split("config groups")[0].splitlines()[1:]
    out: dict[str, str] = {}
    key = ""
    for line in fields:
        if line.startswith("      "):
            out[key] = f"{out[key]} {line.strip()}".strip()
        elif line.startswith("  ") and not line.startswith("    "):
            key = line.strip().split(":")[0]
            out[key] = ""
    return out


@pytest.mark.parametrize("verb", list(VERBS))
def test_no_field_description_is_cut_off(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each description ends where a sentence of its source ends, not inside brackets or at
    an abbreviation's full stop ("(e.g")."""
    shown = described(help_text(verb, capsys))
    cut = {
        key: text
        for key, text in shown.items()
        if sum(map(text.count, "([")) != sum(map(text.count, ")]"))  # "[a, b)" is whole
        or text.endswith(("e.g", "i.e", "("))
    }
    assert not cut, f"`robocompose {verb} --help` cuts these off: {cut}"


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_choice_field_lists_its_names(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    shown = described(help_text(verb, capsys))
    for f in config_fields(VERBS[verb].config_class()):
        if f.choices:
            assert f"one of: {', '.join(f.choices)}" in shown[f.key], f.key


def test_train_help_lists_the_policy_recipes_and_prediction_types(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_text("train", capsys)
    shown = described(text)
    assert "prediction_type, one of epsilon, sample, v_prediction" in shown["policy.family"]
    assert "one of: unet, mlp" in shown["policy.backbone"]
    assert "one of: float32, float16, bfloat16" in shown["checkpoint_dtype"]
    groups = text.split("config groups (group=option):")[1]
    presets = groups.split("policy:")[1].split("task:")[0].replace(",", " ").split()
    assert {"diffusion_mlp", "diffusion_unet_v", "flow_unet"} <= set(presets)
    assert "(e.g. one per scene variant)" in shown["extra_datasets"]


def test_a_name_outside_the_choices_lists_them_and_the_nearest() -> None:
    listed = r"`method` must be one of \['grid', 'halving', 'racing'\]. Got 'halvng'."
    with pytest.raises(SystemExit, match=listed + r" Did you mean 'halving'\?"):
        main(["search", "--method", "halvng"])  # refused before any episode
