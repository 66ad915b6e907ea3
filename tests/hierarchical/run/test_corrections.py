"""Corrections: the rules read directions, amounts, substitutions, stop and skip; a correction
spoken mid-run changes the running plan in the real world (the calls executed change, a
move_to's target shifts, a stop halts holding the block); every one is logged to JSONL; the
LLM fallback maps free text to a valid edit under a JSON schema."""

from __future__ import annotations

import io
import json

import pytest

from robocompose.hierarchical.base import SkillCall
from robocompose.hierarchical.instructions import instruction_items, make_world
from robocompose.hierarchical.run.corrections import (
    CorrectionEdit,
    CorrectionLog,
    CorrectionNotUnderstood,
    CorrectionQueue,
    Corrections,
    parse_correction,
    parse_rules,
    read_lines_into,
    resolve_object,
)
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.skills.scripted import build_registry

SCENE = ["red_block", "green_block", "blue_block"]
STACK = instruction_items("long_horizon", ["stack_three"])[0]


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("a bit more to the left", (-0.02, 0.0, 0.0)),
        ("A little further forward", (0.0, 0.02, 0.0)),  # "further" and "forward": once
        ("go right and down slightly", (0.02, 0.0, -0.02)),
        ("up 3 cm", (0.0, 0.0, 0.03)),
        ("back 15mm", (0.0, -0.015, 0.0)),
        ("a lot higher", (0.0, 0.0, 0.05)),
        ("left 2 metres", (-0.1, 0.0, 0.0)),  # clamped to MAX_NUDGE_M
    ],
)
def test_rules_read_directions_and_amounts(text, offset):
    edit = parse_rules(text, SCENE)
    assert edit is not None and edit.kind == "nudge" and edit.source == "rules"
    assert edit.offset_m == pytest.approx(offset)


@pytest.mark.parametrize(
    ("text", "kind", "new", "old"),
    [
        ("pick the blue one instead", "substitute", "blue", None),
        ("no, not the red, the green one", "substitute", "green", "red"),
        ("use the blue block instead of the red one", "substitute", "blue block", "red"),
        ("STOP!", "stop", None, None),
        ("hold on", "stop", None, None),
        ("skip", "skip", None, None),
        ("next", "skip", None, None),
    ],
)
def test_rules_read_substitutions_stop_and_skip(text, kind, new, old):
    edit = parse_rules(text, SCENE)
    assert (edit.kind, edit.new, edit.old) == (kind, new, old)


def test_unreadable_text_needs_an_llm_and_bad_edits_are_refused():
    assert parse_rules("hmm, that looks odd", SCENE) is None
    with pytest.raises(CorrectionNotUnderstood, match="matches no rule"):
        parse_correction("hmm, that looks odd", SCENE)
    with pytest.raises(ValueError, match="`kind` must be one of"):
        CorrectionEdit("dance")
    with pytest.raises(ValueError, match="`offset_m` must be 3 values within"):
        CorrectionEdit("nudge", offset_m=(0.5, 0.0, 0.0))
    with pytest.raises(ValueError, match="needs `new`"):
        CorrectionEdit("substitute")
    with pytest.raises(ValueError, match="non-empty"):
        CorrectionQueue().put("  ")


def test_object_words_resolve_to_scene_names():
    objects = [*SCENE, "blue_bin"]
    assert resolve_object("blue", "red_block", objects) == "blue_block"
    assert resolve_object("blue", "red_bin", objects) == "blue_bin"
    assert resolve_object("blue block", None, objects) == "blue_block"
    assert resolve_object("purple", "red_block", objects) is None


def test_stdin_lines_reach_the_queue():
    queue = CorrectionQueue()
    read_lines_into(io.StringIO("a bit more to the left\n\nstop\n"), queue).join(timeout=5)
    assert [queue.poll()[1], queue.poll()[1], queue.poll()] == [
        "a bit more to the left",
        "stop",
        None,
    ]


def _say(queue: CorrectionQueue, text: str, call: int, step: int):
    """A person speaking at control step `step` of skill call `call` (a world hook)."""

    def hook(world) -> None:
        if world.call_index == call and world.call_steps == step:
            queue.put(text)

    return hook


def _run(calls, text, call, step, log=None):
    world = make_world(STACK)
    queue = CorrectionQueue()
    world.add_hook(_say(queue, text, call, step))
    executor = PlanExecutor(world, build_registry(world), corrections=Corrections(queue, log))
    return world, executor.run_calls(calls)


def test_substitution_mid_pick_changes_the_executed_calls(tmp_path):
    log = CorrectionLog(tmp_path / "corrections.jsonl")
    plan = [
        SkillCall("pick", {"obj": "red_block"}),
        SkillCall("place", {"obj": "red_block", "target": "green_block"}),
    ]
    world, result = _run(plan, "pick the blue one instead", call=0, step=3, log=log)
    executed = [(t.skill, t.args.get("obj"), t.error) for t in result.traces]
    assert executed == [
        ("pick", "red_block", "interrupted: substitute"),
        ("pick", "blue_block", None),
        ("place", "blue_block", None),
    ]
    assert world.on_top_of("blue_block") == "green_block"
    assert world.on_top_of("red_block") == "table"
    (line,) = (tmp_path / "corrections.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["text"] == "pick the blue one instead"
    assert entry["edit"]["kind"] == "substitute" and entry["edit"]["old"] == "red_block"
    assert entry["plan_before"][1] == "place(obj='red_block', target='green_block')"
    assert entry["plan_after"] == [
        "pick(obj='blue_block')",
        "place(obj='blue_block', target='green_block')",
    ]
    assert entry["state"]["objects"]["red_block"]["on"] == "table"
    assert result.corrections == [entry]


def test_nudge_restarts_move_to_with_a_shifted_target():
    plan = [SkillCall("move_to", {"x": 0.05, "y": 0.0, "z": 0.15})]
    world, result = _run(plan, "a bit more to the left", call=0, step=2)
    first, restarted = result.traces
    assert first.error == "interrupted: nudge" and first.args["x"] == 0.05
    assert restarted.args == {"x": 0.03, "y": 0.0, "z": 0.15} and restarted.success_check
    assert result.corrections[0]["plan_after"] == ["move_to(x=0.03, y=0.0, z=0.15)"]


def test_nudge_without_a_position_argument_is_logged_not_applied():
    world, result = _run([SkillCall("pick", {"obj": "red_block"})], "more to the left", 0, 2)
    assert [t.error for t in result.traces] == [None]
    assert "has no position argument" in result.corrections[0]["error"]


def test_stop_halts_holding_the_block_and_skip_moves_on():
    plan = [
        SkillCall("pick", {"obj": "green_block"}),
        SkillCall("place", {"obj": "green_block", "target": "red_block"}),
        SkillCall("pick", {"obj": "blue_block"}),
    ]
    world, stopped = _run(plan, "stop", call=1, step=4)
    assert stopped.outcome == "stopped" and [t.skill for t in stopped.traces] == ["pick", "place"]
    assert world.holding() == "green_block"  # halted safely: nothing dropped
    assert stopped.corrections[0]["plan_after"] == []

    world, skipped = _run(plan, "skip", call=1, step=4)
    assert [(t.skill, t.error) for t in skipped.traces] == [
        ("pick", None),
        ("place", "interrupted: skip"),
        ("pick", "cannot pick: the gripper already holds green_block; place it first"),
    ]


def test_program_calls_follow_a_substitution():
    world = make_world(STACK)
    queue = CorrectionQueue()
    world.add_hook(_say(queue, "the blue one instead", call=0, step=3))
    executor = PlanExecutor(world, build_registry(world), corrections=Corrections(queue))
    result = executor.run_program('pick("red_block")\nplace("red_block", "green_block")')
    assert [t.args.get("obj") for t in result.traces] == ["red_block", "blue_block", "blue_block"]
    assert world.on_top_of("blue_block") == "green_block"


@pytest.mark.smollm2
def test_llm_fallback_gives_a_valid_edit(smollm2, tmp_path):
    from robocompose.hierarchical.llm.cache import CachedLLM

    edit = parse_correction("ugh, that is not what I meant", SCENE, CachedLLM(smollm2, tmp_path))
    assert edit.kind in ("nudge", "substitute", "stop", "skip")  # the schema's kinds only
    assert edit.source == smollm2.model  # the LLM read it, not the rules
    if edit.kind == "substitute":
        assert edit.new in SCENE
