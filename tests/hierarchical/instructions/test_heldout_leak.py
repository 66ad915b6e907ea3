"""The test collection never enters a prompt: no held-out phrasing in any text a planner builds or
in the source it builds prompts from, and no few-shot answer states a held-out item's goal."""

from __future__ import annotations

import re
from pathlib import Path

from robocompose.hierarchical.instructions import HELD_OUT, instruction_items

ROOT = Path(__file__).resolve().parents[3]
HELDOUT = [item for collection in HELD_OUT for item in instruction_items(collection)]
DEV_REQUEST = instruction_items("dev")[0].instruction


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


PHRASINGS = {_norm(item.instruction): item.key for item in HELDOUT}


def _leaks(text: str) -> list[str]:
    flat = f" {_norm(text)} "
    return [key for phrase, key in PHRASINGS.items() if f" {phrase} " in flat]


def _statements(answer: str) -> frozenset[str]:
    """A few-shot answer's constraints as a set: `"on(a, b); in(c, d_bin)"` -> its statements
    with `_block` dropped, lists (`bottom_up`, `top_down`) as their `on` pairs, so they compare
    with gold facts written the same way."""
    out = set()
    for s in answer.replace("_block", "").split(";"):
        s = s.strip()
        listed = re.fullmatch(r"(bottom_up|top_down)\((.*)\)", s)
        if listed:
            names = [n.strip() for n in listed.group(2).split(",")]
            names = names if listed.group(1) == "bottom_up" else names[::-1]
            out |= {f"on({up}, {low})" for low, up in zip(names, names[1:], strict=False)}
        elif s:
            out.add(s)
    return frozenset(out)


def _gold_statements(item) -> frozenset[str]:
    """A held-out item's goal as the statements a few-shot answer would state."""
    out = set()
    for name, *args in item.goal:
        short = [a.removesuffix("_block") for a in args]
        if name in ("on", "in"):
            out.add(f"{name}({short[0]}, {short[1]})")
        elif name == "in_no_bin":
            out.add(f"not in({short[0]}, any_bin)")
    return frozenset(out)


GOALS = {_gold_statements(item): item.key for item in HELDOUT if item.feasible}


def test_no_heldout_phrasing_in_the_package_or_configs():
    package = ROOT / "robocompose"
    sources = [*package.rglob("*.py"), *package.rglob("*.yaml"), *(package / "configs").rglob("*")]
    data = ROOT / "robocompose/hierarchical/instructions/data"
    heldout_files = {data / f"{collection}.yaml" for collection in HELD_OUT}
    assert heldout_files <= set(sources)  # the only files that may hold them
    found = {
        str(path.relative_to(ROOT)): leaks
        for path in sources
        if path.is_file() and path not in heldout_files and path.suffix in (".py", ".yaml", ".json")
        for leaks in [_leaks(path.read_text(errors="replace"))]
        if leaks
    }
    assert not found


def _scene_world():
    from robocompose.hierarchical.world import SimWorld

    item = next(i for i in HELDOUT if i.scene.env == "SortBins")
    world = SimWorld(item.scene.env, item.scene.env_kwargs())
    world.reset(item.seed)
    return world


def test_no_heldout_phrasing_or_goal_in_the_planners_prompts():
    from robocompose.hierarchical.planners import prompts
    from robocompose.hierarchical.planners.saycan import SayCanPlanner
    from robocompose.hierarchical.skills.scripted import build_registry

    world = _scene_world()
    registry = build_registry(world)
    skills = prompts.skill_list(registry)
    listing = prompts.api_listing(skills)
    scene = prompts.scene_summary(world.snapshot())
    examples = prompts.usable_examples(skills)
    texts = {
        "code": prompts.code_messages(listing, examples, scene, DEV_REQUEST),
        "skills": prompts.skill_messages(listing, examples, scene, DEV_REQUEST),
        "define": prompts.define_messages(
            listing, prompts.usable_define_examples(registry), "put_on", "put_on('a', 'b')"
        ),
        "saycan": [{"content": SayCanPlanner(None, registry).prompt(DEV_REQUEST, [], scene)}],
    }
    answers = [
        "; ".join(f"{'in' if 'bin' in a['target'] else 'on'}({a['obj']}, {a['target']})"
                  for name, a in ex.calls if name == "place")
        for ex in prompts.EXAMPLES
    ]  # fmt: skip
    from robocompose.hierarchical.goal import prompt as goal_prompt
    from robocompose.hierarchical.goal.facts import SceneNames

    texts["goal"] = goal_prompt.messages(SceneNames.of(world), DEV_REQUEST)
    answers += [answer for _, _, answer in goal_prompt.EXAMPLES]
    world.close()
    for planner, messages in texts.items():
        text = "\n".join(m["content"] for m in messages)
        assert not _leaks(text), planner
    copied = [GOALS[_statements(a)] for a in answers if _statements(a) in GOALS]
    assert not copied


def test_the_check_sees_a_leak():
    item = HELDOUT[5]
    assert _leaks(f"Examples:\n# task: {item.instruction.upper()}\n") == [item.key]
    tower = next(i for i in HELDOUT if i.category == "tower_two")
    assert _statements("; ".join(sorted(_gold_statements(tower)))) in GOALS
    three = next(i for i in HELDOUT if i.category == "tower_three")
    above = {f[2]: f[1] for f in three.goal if f[0] == "on"}
    order = [next(f[1] for f in three.goal if f[0] == "on_table")]
    while order[-1] in above:
        order.append(above[order[-1]])
    names = [b.removesuffix("_block") for b in order[::-1]]
    assert _statements(f"top_down({', '.join(names)})") in GOALS
