"""Corrections become data: a spoken step ("no, put the red block on the green block") replaces
the announced call before it moves; a real run watched by the simulated person writes a log whose
pairs and corrected plan are read back; the bank retrieves a phrasing across colours; with the
bank in its prompt Qwen plans a case it was corrected on the corrected way."""

from __future__ import annotations

import json

import pytest

from robocompose.hierarchical.base import SkillCall
from robocompose.hierarchical.instructions import instruction_items, make_world, reference_plan
from robocompose.hierarchical.instructions.simulated_user import SimulatedUser, goal_steps, say
from robocompose.hierarchical.planners.skills import SkillPlanner
from robocompose.hierarchical.run.correction_bank import (
    CorrectedPlanner,
    CorrectionBank,
    corrected_plans,
    parse_call,
    read_pairs,
)
from robocompose.hierarchical.run.corrections import (
    CorrectionLog,
    CorrectionQueue,
    Corrections,
    parse_rules,
)
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.skills.scripted import build_registry

OBJECTS = ["red_block", "green_block", "blue_block", "red_bin"]
# "from top to bottom ...: blue, green, red"
TOP_DOWN = instruction_items("long_horizon", ["stack_three"])[6]


def _calls(plan: list[dict]) -> list[SkillCall]:
    return [SkillCall(c["skill"], c["args"]) for c in plan]


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ("no, pick up the green block", "pick(obj='green_block')"),
        ("Take the red one.", "pick(obj='red_block')"),
        ("put the red cube on the blue one", "place(obj='red_block', target='blue_block')"),
        (
            "no, put the blue block on the green block",
            "place(obj='blue_block', target='green_block')",
        ),
        ("drop the red block in the red bin", "place(obj='red_block', target='red_bin')"),
    ],
)
def test_a_spoken_step_replaces_the_call(text, call):
    edit = parse_rules(text, OBJECTS)
    assert edit is not None and edit.kind == "replace"
    assert str(SkillCall(edit.skill, edit.args)) == call == str(parse_call(call))


def test_other_corrections_still_read_as_before():
    assert parse_rules("pick the blue one instead", OBJECTS).kind == "substitute"
    assert parse_rules("place it lower", OBJECTS).kind == "nudge"
    assert parse_rules("put the purple block on the red block", OBJECTS) is None


def test_a_correction_waiting_at_announce_applies_before_the_call_moves(tmp_path):
    world = make_world(TOP_DOWN)
    queue = CorrectionQueue()
    log = CorrectionLog(tmp_path / "c.jsonl", {"instruction": TOP_DOWN.instruction})
    executor = PlanExecutor(world, build_registry(world), corrections=Corrections(queue, log))
    queue.put("no, pick up the green block")
    result = executor.run_calls([SkillCall("pick", {"obj": "blue_block"})])
    assert [(t.skill, t.args, t.error) for t in result.traces] == [
        ("pick", {"obj": "green_block"}, None)
    ]
    assert world.holding() == "green_block"
    (entry,) = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert entry["done"] == [] and entry["state"]["steps"] == 0  # nothing had moved
    assert entry["instruction"] == TOP_DOWN.instruction


def _watched_run(item, plan, log_path, run="r0"):
    """Run `plan` with the simulated person correcting it; the world and the result."""
    world = make_world(item)
    queue = CorrectionQueue()
    log = CorrectionLog(log_path, {"instruction": item.instruction, "run": run})
    executor = PlanExecutor(world, build_registry(world), corrections=Corrections(queue, log))
    executor.on_call = SimulatedUser(item, world, queue)
    return world, executor.run_calls(plan)


def test_pairs_and_the_corrected_plan_come_from_a_real_run_log(tmp_path):
    wrong = [  # the planner's top-to-bottom mistake: the listed order taken as build order
        SkillCall("pick", {"obj": "blue_block"}),
        SkillCall("place", {"obj": "blue_block", "target": "green_block"}),
        SkillCall("pick", {"obj": "green_block"}),
        SkillCall("place", {"obj": "green_block", "target": "red_block"}),
        SkillCall("pick", {"obj": "red_block"}),
    ]
    world, result = _watched_run(TOP_DOWN, wrong, tmp_path / "c.jsonl")
    assert result.task_success and world.success()
    pairs = read_pairs([tmp_path / "c.jsonl"])
    reference = _calls(reference_plan(TOP_DOWN))
    assert [p.wrong for p in pairs] == wrong
    assert [p.corrected for p in pairs] == [*reference, None]  # the fifth call: "stop"
    assert [p.text for p in pairs][-1] == "stop"
    assert pairs[1].state["holding"] == "green_block"  # the state the place was corrected in
    assert pairs[1].done == (reference[0],)
    assert {p.instruction for p in pairs} == {TOP_DOWN.instruction}
    (plan,) = corrected_plans(pairs)
    assert list(plan.calls) == reference and plan.corrections == 5
    assert plan.state["steps"] == 0  # the scene the plan began in
    assert plan.example().calls == tuple((c.skill, c.args) for c in reference)


def test_a_right_plan_is_not_corrected_and_logs_nothing(tmp_path):
    world, result = _watched_run(TOP_DOWN, _calls(reference_plan(TOP_DOWN)), tmp_path / "c.jsonl")
    assert result.task_success and not (tmp_path / "c.jsonl").exists()
    assert goal_steps(TOP_DOWN, world) == []


def test_a_log_without_the_instruction_is_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    world = make_world(TOP_DOWN)
    queue = CorrectionQueue()
    executor = PlanExecutor(
        world, build_registry(world), corrections=Corrections(queue, CorrectionLog(path))
    )
    queue.put(say(SkillCall("pick", {"obj": "green_block"})))
    executor.run_calls([SkillCall("pick", {"obj": "blue_block"})])
    with pytest.raises(ValueError, match=r"c.jsonl:1: the correction has no `instruction`"):
        read_pairs([path])
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        read_pairs([tmp_path / "missing.jsonl"])


def test_the_bank_finds_a_phrasing_with_other_colours(tmp_path):
    stack = instruction_items("long_horizon", ["stack_three"])
    for k in (1, 6):  # "build a tower: ..." and "from top to bottom ..."
        wrong = [SkillCall("pick", {"obj": "red_block"}), SkillCall("pick", {"obj": "blue_block"})]
        _watched_run(stack[k], wrong, tmp_path / "c.jsonl", run=f"r{k}")
    bank = CorrectionBank.from_logs([tmp_path / "c.jsonl"])
    assert len(bank.plans) == 2
    (near,) = bank.nearest("from top to bottom the tower should be red, blue, green", 1)
    assert near.instruction == stack[6].instruction
    assert list(near.calls) == _calls(reference_plan(stack[6]))[:2]  # both calls corrected
    assert bank.nearest("sort the blocks into the bins", 2, env="SortBins") == []  # no towers
    assert len(bank.nearest("sort the blocks into the bins", 2, env="Stack")) == 2
    assert [p.instruction for p in bank.nearest("tower: green at the bottom, then red", 2)][-1] == (
        stack[1].instruction
    )


@pytest.mark.qwen
def test_with_the_bank_qwen_plans_the_corrected_case_right(qwen, tmp_path):
    world = make_world(TOP_DOWN)
    planner = SkillPlanner(qwen, build_registry(world))
    before = planner.plan(TOP_DOWN.instruction, world.snapshot())
    reference = _calls(reference_plan(TOP_DOWN))
    assert before.ok and list(before.calls) != reference  # the mistake the person corrected
    _watched_run(TOP_DOWN, list(before.calls), tmp_path / "c.jsonl")
    bank = CorrectionBank.from_logs([tmp_path / "c.jsonl"])
    after = CorrectedPlanner(planner, bank, k=1).plan(TOP_DOWN.instruction, world.snapshot())
    assert list(after.calls) == reference


def test_the_cli_prints_and_writes_the_pairs_of_a_log(tmp_path, capsys):
    from robocompose.cli import main

    wrong = [SkillCall("pick", {"obj": "blue_block"})]
    _watched_run(TOP_DOWN, wrong, tmp_path / "c.jsonl")
    out = tmp_path / "pairs.jsonl"
    main(["corrections", str(tmp_path / "c.jsonl"), "--out", str(out), "--instruction", "stack"])
    printed = capsys.readouterr().out
    assert "1 corrections, 1 corrected plans from 1 log(s)" in printed
    assert "pick(obj='blue_block') -> pick(obj='green_block')" in printed
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["corrected"] == "pick(obj='green_block')" and record["said"].startswith("no,")
    with pytest.raises(SystemExit, match="`logs` must name at least one"):
        main(["corrections"])


def test_plan_config_checks_its_correction_settings():
    from robocompose.hierarchical.api import PlanConfig

    with pytest.raises(ValueError, match="`correction_logs` apply to planner=code or skills"):
        PlanConfig(planner="saycan", correction_logs=["runs/plan/corrections.jsonl"])
    with pytest.raises(ValueError, match="`correction_examples` must be >= 1"):
        PlanConfig(correction_examples=0)
