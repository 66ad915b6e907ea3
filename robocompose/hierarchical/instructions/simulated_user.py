"""The person of the benchmark and tests: it knows an item's goal, watches a run
(`PlanExecutor.on_call`) and, when the announced call is not one the goal needs next, says the
right one in words ("no, put the red block on the green block"), through the ordinary
correction queue, parser and log."""

from __future__ import annotations

import itertools

from robocompose.hierarchical.base import SkillCall
from robocompose.hierarchical.instructions import STACK_THREE, InstructionItem
from robocompose.hierarchical.run.corrections import CorrectionQueue
from robocompose.hierarchical.world import SimWorld


def goal_steps(item: InstructionItem, world: SimWorld) -> list[SkillCall] | None:
    """The calls that make progress towards `item`'s goal from the world as it is: [] when the
    goal is met, None when the world is off the path the person knows (they stay quiet)."""
    held = world.holding()
    if item.category == STACK_THREE:
        order = [f"{c}_block" for c in item.scene.order]
        pending = [(up, low) for low, up in itertools.pairwise(order) if world.on_top_of(up) != low]
        if not pending:
            return []
        upper, lower = pending[0]
        if held is not None:
            return [SkillCall("place", {"obj": upper, "target": lower})] if held == upper else None
        return [SkillCall("pick", {"obj": upper})]
    bins = {b: f"{b.split('_')[0]}_bin" for b in world.objects()}
    if held is not None:
        return [SkillCall("place", {"obj": held, "target": bins[held]})]
    return [SkillCall("pick", {"obj": b}) for b in world.objects() if world.in_bin(b) != bins[b]]


def say(call: SkillCall) -> str:
    """The call in the words a person uses: "no, put the red block on the green block"."""

    def thing(name: str) -> str:
        colour, _, kind = name.rpartition("_")
        return f"the {colour} {kind}"

    if call.skill == "pick":
        return f"no, pick up {thing(call.args['obj'])}"
    if call.skill == "place":
        where = "in" if call.args["target"].endswith("_bin") else "on"
        return f"no, put {thing(call.args['obj'])} {where} {thing(call.args['target'])}"
    raise ValueError(f"the simulated user says pick and place calls only. Got {call}.")


class SimulatedUser:
    """The person watching a run: told each announced call (`PlanExecutor.on_call`), it corrects
    one the goal does not need next, and says "stop" when the goal is met and more comes."""

    def __init__(self, item: InstructionItem, world: SimWorld, queue: CorrectionQueue) -> None:
        self.item, self.world, self.queue = item, world, queue
        self.said: list[str] = []

    def __call__(self, call: SkillCall) -> None:
        good = goal_steps(self.item, self.world)
        if good is None or call in good:
            return
        text = say(good[0]) if good else "stop"
        self.said.append(text)
        self.queue.put(text)
