"""The goal planner: constraints -> goal -> calls that run in MuJoCo; questions and refusals
move nothing; a failed call is repaired from the observed facts without another LLM call; and
with the real local model, requests in words become the right tower (or a question)."""

from __future__ import annotations

import io
import itertools

import pytest

from robocompose.hierarchical.instructions import instruction_items, make_world
from robocompose.hierarchical.planners.goal import GoalPlan, GoalPlanner
from robocompose.hierarchical.run.plan_executor import PlanExecutor
from robocompose.hierarchical.run.repair import run_with_repair
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import FaultHook, SimWorld

STACK = instruction_items("long_horizon", ["stack_three"])[0]
TOWER = [("on", "green_block", "red_block"), ("on", "blue_block", "green_block")]


def _setup(text: str, arrange=None, task="Stack", instruction="do it"):
    """A goal planner without an LLM (llm=None: any LLM call would fail the test) whose goal
    is decided from `text`, the constraints a model would have written for `instruction`."""
    world = make_world(STACK) if task == "Stack" else _sort_world()
    if arrange:
        world.arrange(arrange)
    registry = build_registry(world)
    planner = GoalPlanner(None, registry, world)
    decided = planner.decide(instruction, text, world.facts())
    return world, registry, planner, decided


class _Answered:
    """The goal planner's answer to one request, given again as every round's plan."""

    def __init__(self, plan: GoalPlan) -> None:
        self.answer = plan

    def plan(self, instruction, world_summary, feedback=None) -> GoalPlan:
        return self.answer


def _sort_world() -> SimWorld:
    world = SimWorld("SortBins", {"blocks": ("red", "blue"), "bins": ("red", "green", "blue")})
    world.reset(7)
    return world


def _run(world, registry, planner, instruction, max_rounds=0, answered=None):
    executor = PlanExecutor(world, registry, task_check=planner.reached)
    return run_with_repair(instruction, answered or planner, executor, max_rounds=max_rounds)


def test_a_rebuilt_tower_runs_in_mujoco_and_the_goal_holds():
    world, registry, planner, _ = _setup("top_down(red, green, blue)", TOWER, instruction="flip")
    record = _run(world, registry, planner, "flip")
    assert record.success and record.caught == 0 and record.llm_calls == 0
    assert record.rounds[0].planning["constraints"] == "top_down(red, green, blue)"
    assert planner.reached(world)
    assert world.on_top_of("green_block") == "blue_block"
    assert world.on_top_of("red_block") == "green_block"


@pytest.mark.parametrize("order", list(itertools.permutations(("red", "green", "blue"))))
@pytest.mark.parametrize("start", [None, TOWER], ids=["flat", "rebuild"])
def test_every_tower_is_built_in_mujoco(order, start):
    text = f"bottom_up({', '.join(order)})"
    world, registry, planner, _ = _setup(text, start, instruction="tower")
    record = _run(world, registry, planner, "tower")
    assert record.success and record.caught == 0
    for lower, upper in itertools.pairwise(order):
        assert world.on_top_of(f"{upper}_block") == f"{lower}_block"


def test_a_swap_runs_in_mujoco():
    world, registry, planner, _ = _setup("swap(red, blue)", TOWER, instruction="swap")
    record = _run(world, registry, planner, "swap")
    assert record.success and world.on_top_of("red_block") == "green_block"
    assert world.on_top_of("green_block") == "blue_block"


def test_sorting_with_a_distractor_bin_runs_in_mujoco():
    world, registry, planner, _ = _setup("sort", task="SortBins", instruction="sort")
    record = _run(world, registry, planner, "sort")
    assert record.success and world.in_bin("red_block") == "red_bin"
    assert world.in_bin("blue_block") == "blue_bin"


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ("absent(purple)", "declined"),
        ("on(red, red)", "declined"),
        ("on(red, blue); on(blue, red)", "declined"),
        ("unsupported", "declined"),
        ("tower; bottom(red)", "asked"),
        ("unclear", "asked"),
    ],
)
def test_impossible_or_ambiguous_requests_move_nothing(answer, outcome):
    world, registry, planner, decided = _setup(answer)
    record = _run(world, registry, planner, "do it", 2, _Answered(decided))
    assert record.rounds[-1].outcome == outcome and len(record.rounds) == 1
    assert world.steps == 0 and not record.rounds[0].traces  # not one robot step
    assert isinstance(record.held_back, GoalPlan) and record.held_back.message


def test_a_failed_call_is_repaired_from_the_facts_without_the_llm():
    world, registry, planner, _ = _setup("on(green, red); on(blue, green)", instruction="stack")
    world.add_hook(FaultHook("slip", at_call=1, at_step=3))  # green falls out of the hand
    record = _run(world, registry, planner, "stack", max_rounds=2)
    assert record.rounds[0].outcome == "skill_failed"
    assert record.success and len(record.rounds) == 2  # re-planned from the facts alone
    assert record.llm_calls == 0  # (the planner has no LLM: a call would have failed)


def test_choosing_an_option_plans_without_the_llm():
    world, registry, planner, plan = _setup("tower; bottom(red)")
    assert plan.kind == "ask" and len(plan.question.options) == 2
    chosen = planner.choose("a tower on red", plan.question.options[1])
    assert chosen.kind == "calls" and not chosen.completions
    assert chosen.goal.config.support["blue_block"] == "red_block"


def test_put_down_spots_are_free_and_outside_the_bins():
    world, registry, planner, plan = _setup("all on table", TOWER, instruction="unstack")
    spots = [(c.args["x"], c.args["y"]) for c in plan.calls if c.skill == "place_at"]
    assert len(spots) == 2 and spots[0] != spots[1]
    record = _run(world, registry, planner, "unstack")
    assert record.success and all(world.on_top_of(b) == "table" for b in world.objects())


# -- the real local model ------------------------------------------------------------------------
@pytest.mark.qwen
@pytest.mark.parametrize(
    ("request_", "support"),
    [
        # one request, one order: each order is a rewrite under its own ~2000-token prefix (a
        # minute of prompt on one core); the default's second reader is this prompt in one order
        ("put green on red then blue on green", {"green_block": "red_block",
                                                 "blue_block": "green_block"}),
    ],
)  # fmt: skip
def test_qwen_with_examples_states_the_goal_and_the_plan_reaches_it(qwen, request_, support):
    from robocompose.hierarchical.planners.goal import GoalPlannerConfig

    world = make_world(STACK)
    registry = build_registry(world)
    planner = GoalPlanner(qwen, registry, world, GoalPlannerConfig(prompt="examples", orders=1))
    plan = planner.plan(request_, world.snapshot())
    assert plan.kind == "calls", plan.message
    assert all(plan.goal.config.support[b] == below for b, below in support.items())
    assert len(plan.completions) == 1
    assert all(c.completion_tokens < 30 for c in plan.completions)


@pytest.mark.qwen
@pytest.mark.parametrize(
    ("request_", "support"),
    [
        ("put green on red then blue on green", {"green_block": "red_block",
                                                 "blue_block": "green_block"}),
        ("from top to bottom: red, blue, green", {"blue_block": "green_block",
                                                  "red_block": "blue_block"}),
    ],
)  # fmt: skip
def test_the_adapted_qwen_states_the_goal_in_short_rewrites(qwen_goal, request_, support):
    from robocompose.hierarchical.planners.goal import ADAPTED_ORDERS, reading_config

    world = make_world(STACK)
    config = reading_config(qwen_goal)  # the shipped adapter's prompt, over placeholders
    assert (config.prompt, config.orders) == ("lifted", ADAPTED_ORDERS)
    planner = GoalPlanner(qwen_goal, build_registry(world), world, config)
    plan = planner.plan(request_, world.snapshot())
    assert plan.kind == "calls", plan.message
    assert all(plan.goal.config.support[b] == below for b, below in support.items())
    assert len(plan.completions) == ADAPTED_ORDERS  # one short rewrite per listing, agreeing
    assert all(c.prompt_tokens < 150 for c in plan.completions)


@pytest.mark.qwen
def test_goal_readings_put_the_plan_verbs_goal_planner_on_its_readers():
    from robocompose.hierarchical.api import PlanConfig, make_backends, make_planner
    from robocompose.hierarchical.llm import LLMConfig
    from robocompose.hierarchical.llm.models import goal_adapter

    world = make_world(STACK)
    registry = build_registry(world)
    uncached = LLMConfig(cache=False)
    assert PlanConfig().goal_readings == "adapted"  # the default: the adapted model alone
    both = PlanConfig(llm=uncached, goal_readings="both")  # checked by the plain model
    first, second = make_backends(both)
    assert first.lora == goal_adapter("qwen2.5-coder-1.5b").resolve() and second.lora is None
    config = make_planner("goal", first, registry, world, second).config
    assert (config.prompt, config.second_prompt, config.second_orders) == ("lifted", "examples", 1)
    first, second = make_backends(PlanConfig(llm=uncached, goal_readings="adapted"))
    assert second is None
    assert make_planner("goal", first, registry, world).config.second_prompt is None
    first, second = make_backends(PlanConfig(llm=uncached, goal_readings="examples"))
    assert first.lora is None and second is None
    assert make_planner("goal", first, registry, world).config.prompt == "examples"
    first, second = make_backends(PlanConfig(llm=uncached, planner="code"))
    assert first.lora is None and second is None
    with pytest.raises(ValueError, match="goal_readings"):
        PlanConfig(goal_readings="adapter")


@pytest.mark.qwen
def test_a_goal_stands_when_the_second_reader_agrees_and_is_asked_back_when_not(qwen_goal, qwen):
    from robocompose.hierarchical.planners.goal import ADAPTED_ORDERS, GoalPlannerConfig

    world = make_world(STACK)
    config = GoalPlannerConfig(prompt="lifted", orders=ADAPTED_ORDERS, second_prompt="examples")
    request = "put green on red then blue on green"
    planner = GoalPlanner(qwen_goal, build_registry(world), world, config, second=qwen)
    plan = planner.plan(request, world.snapshot())
    assert plan.kind == "calls", plan.message
    assert set(TOWER) <= plan.goal.facts
    # two short adapted rewrites, then one few-shot rewrite by the plain model
    assert len(plan.completions) == ADAPTED_ORDERS + 1
    assert plan.completions[-1].prompt_tokens > 10 * plan.completions[0].prompt_tokens
    # a second reader that reads the request with red and green swapped: nothing moves
    planner = GoalPlanner(qwen_goal, build_registry(world), world, config, second=_Swapped(qwen))
    plan = planner.plan(request, world.snapshot())
    assert plan.kind == "ask" and "more than one way" in plan.message, plan.message
    assert len(plan.question.options) == 2 and not plan.calls


class _Swapped:
    """The real plain model, given the request with red and green swapped: a second reader
    that reads another goal."""

    def __init__(self, llm) -> None:
        self.llm = llm

    def chat(self, messages, **kwargs):
        scene, request = messages[-1]["content"].split("Request: ")
        swapped = request.replace("green", "@").replace("red", "green").replace("@", "red")
        last = {"role": "user", "content": f"{scene}Request: {swapped}"}
        return self.llm.chat([*messages[:-1], last], **kwargs)


@pytest.mark.qwen
def test_the_plan_verb_asks_back_and_reads_the_answer_from_stdin(qwen_goal, tmp_path, monkeypatch):
    from robocompose.hierarchical.api import PlanConfig, Runner

    config = PlanConfig(instruction="put the purple block on the red block", repair_rounds=0,
                        video=False, corrections=False, out=str(tmp_path))  # fmt: skip
    runner = Runner(config, qwen_goal)
    try:
        first = runner.run()
        assert first.outcome in ("asked", "declined") and "purple" in first.message
        assert runner.world.steps == 0
        monkeypatch.setattr("sys.stdin", io.StringIO("use the blue block instead\n"))
        from robocompose.verbs.plan import read_answer

        answer = read_answer(runner.queue, None)
        second = runner.answer(answer)
        assert "use the blue block instead" in runner.instruction
        assert second.outcome in ("success", "asked", "declined")
    finally:
        runner.close()


def test_an_unknown_prompt_is_refused_by_name():
    from robocompose.hierarchical.planners.goal import GoalPlannerConfig

    with pytest.raises(ValueError, match="`prompt` must be one of"):
        GoalPlannerConfig(prompt="fewshot")
    with pytest.raises(ValueError, match="`second_prompt` must be one of"):
        GoalPlannerConfig(second_prompt="fewshot")
    with pytest.raises(ValueError, match="`second_orders` must be 1 to 4"):
        GoalPlannerConfig(second_prompt="examples", second_orders=0)


def test_the_adapted_prompt_is_short_and_its_orders_list_the_scene_differently():
    from robocompose.hierarchical.planners.goal import GoalPlannerConfig

    world = make_world(STACK)
    config = GoalPlannerConfig(prompt="adapted", orders=2)
    planner = GoalPlanner(None, build_registry(world), world, config)
    chats = planner.prompts("put green on red", world.facts())
    assert [len(c) for c in chats] == [2, 2]  # system and request: no examples
    first, second = (c[-1]["content"].split("\n")[0] for c in chats)
    assert first != second and sorted(first.split(";")[0]) == sorted(second.split(";")[0])
    assert len(GoalPlanner(None, build_registry(world), world).prompts("x")[0]) > 20


@pytest.mark.smollm2
def test_the_noisy_channel_keeps_the_goal_the_request_is_likeliest_under_or_asks(smollm2):
    """Two readings that disagree: with no margin the goal under which the real model finds the
    request likeliest stands; with a margin no lead reaches, the planner asks, every reading
    numbered in plain words, the likeliest first."""
    from dataclasses import replace

    from robocompose.hierarchical.goal.constraints import parse
    from robocompose.hierarchical.goal.solver import solve
    from robocompose.hierarchical.planners.goal import GoalPlannerConfig

    world = make_world(STACK)
    try:
        config = GoalPlannerConfig(noisy_channel=True, channel_margin=0.0)
        planner = GoalPlanner(smollm2, build_registry(world), world, config)
        facts = world.facts()
        goals = [
            solve(parse(t, planner.scene), facts, planner.scene, planner.operators)
            for t in ("on(red, green)", "on(green, red)")
        ]
        readings = list(zip(("on(red, green)", "on(green, red)"), goals, strict=True))
        request = "put the red block on top of the green block"
        scores = planner._channel_scores(request, goals)
        likeliest = goals[scores.index(max(scores))]
        plan = planner._resolve(request, readings, facts, ())
        assert plan.kind == "calls" and plan.goal == likeliest
        planner.config = replace(config, channel_margin=1e9)
        plan = planner._resolve(request, readings, facts, ())
        assert plan.kind == "ask" and not plan.calls
        assert plan.question.options[0] == likeliest
        assert "(1) the " in plan.message and "(2) the " in plan.message
        assert plan.message.endswith("Answer with its number.")
    finally:
        world.close()
