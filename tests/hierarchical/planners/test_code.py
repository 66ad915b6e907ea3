"""The code planner: code out of replies, undefined calls found, hierarchical definitions by a
real model within their bounds."""

from __future__ import annotations

import ast

import pytest

from robocompose.hierarchical.llm.cache import CachedLLM
from robocompose.hierarchical.planners.code import (
    CodePlanner,
    CodePlannerConfig,
    NoCodeError,
    extract_code,
    tidy,
    undefined_calls,
)
from robocompose.hierarchical.planners.prompts import BUILTIN_NAMES
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld

PROGRAM = 'pick("blue_block")\nplace("blue_block", "red_block")'


@pytest.mark.parametrize(
    "reply",
    [
        f"```python\n{PROGRAM}\n```",
        f"Here is the program:\n```\n{PROGRAM}\n```\nIt stacks the blue block.",
        f"```py\n{PROGRAM}",  # cut off before the closing fence
        f"Sure, this should work:\n{PROGRAM}\nThis moves blue onto red.",
        f"  {PROGRAM.replace(chr(10), chr(10) + '  ')}",  # indented
    ],
)
def test_code_is_extracted_from_replies(reply):
    assert extract_code(reply) == PROGRAM


def test_fenced_blocks_are_joined_and_other_languages_ignored():
    reply = (
        "```python\ndef lift(b):\n    pick(b)\n```\nthen\n```json\n[1, 2]\n```\n"
        '```python\nlift("red_block")\n```'
    )
    assert extract_code(reply) == 'def lift(b):\n    pick(b)\n\nlift("red_block")'


@pytest.mark.parametrize("reply", ["", "Sure", "I cannot do that, sorry.", "```python\n(((\n```"])
def test_no_code_is_a_clear_error(reply):
    with pytest.raises(NoCodeError, match="holds no Python program"):
        extract_code(reply)


def test_tidy_drops_in_scope_imports_and_api_stubs_only():
    code = (
        "import math\nimport numpy as np\nimport os\n"
        "def pick(obj):\n    pass\n"
        'def helper():\n    pick("red_block")\nhelper()'
    )
    assert tidy(code, {"pick"}) == 'import os\ndef helper():\n    pick("red_block")\nhelper()'


def test_undefined_calls_in_order_with_their_call_sites():
    code = (
        "def stack(a, b):\n    grab(a)\n    place(a, b)\n"
        "for block in objects():\n    stack(block, 'red_block')\n"
        "fn = len\nfn([1])\nreport(sorted([2, 1]))\ngrab('x')"
    )
    known = {"place", "objects"} | BUILTIN_NAMES
    assert undefined_calls(ast.parse(code), code, known) == [
        ("grab", "grab(a)"),
        ("report", "report(sorted([2, 1]))"),
    ]


def test_config_is_validated():
    with pytest.raises(ValueError, match="`max_depth` must be >= 0. Got -1"):
        CodePlannerConfig(max_depth=-1)
    with pytest.raises(ValueError, match="`define_max_tokens` must be >= 16"):
        CodePlannerConfig(define_max_tokens=8)


@pytest.fixture(scope="module")
def scene():
    world = SimWorld("Stack", {"blocks": ["red", "green", "blue"]})
    snapshot = world.reset(0)
    yield build_registry(world), snapshot
    world.close()


def test_bounds_that_forbid_definitions_ask_nothing(scene):
    registry, _ = scene
    planner = CodePlanner(_Unreachable(), registry, config=CodePlannerConfig(max_depth=0))
    plan = planner.complete("build_tower()\nplace('red_block', 'blue_block')")
    assert plan.undefined == ("build_tower",) and plan.completions == ()
    assert "may nest only 0 levels deep" in plan.problems[0]
    assert planner.complete("pick(").problems[0].startswith("line 1: syntax error")


class _Unreachable:
    """A backend that must not be asked (the bounds forbid any LLM call)."""

    model = "none"

    def chat(self, *args, **kwargs):
        raise AssertionError("the planner asked the LLM although its bounds forbid it")


@pytest.mark.qwen
def test_qwen_defines_an_undefined_function(qwen, scene, tmp_path):
    registry, _ = scene
    planner = CodePlanner(CachedLLM(qwen, tmp_path / "cache"), registry)
    plan = planner.complete('build_tower(["red_block", "green_block", "blue_block"])')
    assert plan.ok, (plan.problems, [c.text for c in plan.completions])
    assert plan.functions_defined[0] == "build_tower" and len(plan.completions) == 1
    tree = ast.parse(plan.code)
    known = set(registry) | set(registry.queries) | BUILTIN_NAMES
    assert undefined_calls(tree, plan.code, known) == []
    called = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert "place" in called and called <= known | {"build_tower"}


@pytest.mark.smollm2
def test_definitions_stay_within_their_bounds(smollm2, scene, tmp_path):
    registry, snapshot = scene
    backend = CachedLLM(smollm2, tmp_path / "cache")
    known = set(registry) | set(registry.queries) | BUILTIN_NAMES

    deep = CodePlanner(backend, registry, config=CodePlannerConfig(max_depth=1))
    plan = deep.complete("move_all_blocks(objects())")  # SmolLM2's helper calls a helper
    assert len(plan.completions) == 1  # only the main program's call was asked about
    left = [name for name, _ in undefined_calls(ast.parse(plan.code), plan.code, known)]
    assert left == list(plan.undefined)
    assert all(any(f"`{name}`" in p for p in plan.problems) for name in left)

    config = CodePlannerConfig(max_depth=3, max_define_calls=1, define_max_tokens=128)
    planner = CodePlanner(backend, registry, config=config)
    plan = planner.complete("sort_blocks()\nbuild_tower()")
    assert len(plan.completions) == 1  # one definition asked, the budget allows no more
    assert "build_tower" in plan.undefined
    assert any("budget of 1 definition requests is used up" in p for p in plan.problems)
    ast.parse(plan.code)

    full = planner.plan("put the green block on the red block", snapshot)
    assert 1 <= len(full.completions) <= 2
    assert all(c.completion_tokens > 0 for c in full.completions)
    if full.ok:
        ast.parse(full.code)
