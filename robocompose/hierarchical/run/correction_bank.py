"""Corrections become data (Yell At Your Robot): logged corrections -> a planner that heeds them.

Every correction applied while a plan runs is a line of a `CorrectionLog` (JSONL): what was
said, the state, the calls already run, the plan before and after, and the run's instruction.
Here they become training data for the high level:

    pairs = read_pairs(["runs/a/corrections.jsonl"])   # (instruction, state, wrong, corrected)
    bank = CorrectionBank.from_pairs(pairs)             # the plans as the person left them
    planner = CorrectedPlanner(SkillPlanner(llm, registry), bank, k=3)
    planner.plan(instruction, world.snapshot())         # the 3 nearest corrected plans as shots

The fine-tuned high level is a prompt bank: for a new instruction, the corrected plans whose
instructions read most alike (cosine over word uni- and bigrams, colour words masked, so "from
top to bottom: red, green, blue" finds the same phrasing with other colours) are added to the
planner's few-shot examples. No weights change; the planner's choice does.

The person who corrects the benchmark's runs is `hierarchical.instructions.simulated_user`.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robocompose.hierarchical.base import Plan, SkillCall
from robocompose.hierarchical.planners.prompts import Example, scene_summary

APPLIED_KINDS = ("nudge", "substitute", "replace")  # edits that change a call
# masked in the similarity, so a phrasing matches itself with other colours
COLOUR_WORDS = frozenset(
    [
        "red",
        "green",
        "blue",
        "yellow",
        "orange",
        "purple",
        "pink",
        "black",
        "white",
        "grey",
        "gray",
        "brown",
        "cyan",
        "magenta",
        "violet",
        "scarlet",
        "crimson",
        "emerald",
        "lime",
        "navy",
        "azure",
        "teal",
        "indigo",
        "gold",
        "silver",
    ]
)


# -- reading logs ---------------------------------------------------------------------------------
def parse_call(text: str) -> SkillCall:
    """A logged call, `place(obj='red_block', target='green_block')`, back into a SkillCall."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
            raise ValueError("not name(keyword=value, ...)")
        return SkillCall(node.func.id, {k.arg: ast.literal_eval(k.value) for k in node.keywords})
    except (SyntaxError, ValueError) as e:
        raise ValueError(f"logged call {text!r} is not `skill(arg=value, ...)` ({e}).") from None


@dataclass(frozen=True)
class CorrectionPair:
    """One applied correction as a training example: in `state`, for `instruction`, the
    planner's next call was `wrong`; the person's correction made it `corrected` (None for a
    "stop": nothing more is to be done)."""

    instruction: str
    state: dict[str, Any]
    wrong: SkillCall
    corrected: SkillCall | None
    text: str
    done: tuple[SkillCall, ...]  # calls of the plan that had run before
    start_state: dict[str, Any]  # the world when the plan began ({} in logs that lack it)
    plan_after: tuple[SkillCall, ...]  # the corrected call and the rest of the plan
    run: str  # which run the correction came from
    time: float


def read_pairs(paths: Iterable[str | Path]) -> list[CorrectionPair]:
    """Every applied correction and stop in the logs, in log order; corrections not understood
    or not applied, and skips, are left out."""
    pairs = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"correction log {path} does not exist.")
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                pair = _pair(json.loads(line), f"{path}:{number}")
                if pair is not None:
                    pairs.append(pair)
    return pairs


def _pair(record: dict[str, Any], where: str) -> CorrectionPair | None:
    edit = record.get("edit")
    if record.get("error") or not edit or edit.get("kind") not in (*APPLIED_KINDS, "stop"):
        return None
    if not record.get("instruction"):
        raise ValueError(
            f"{where}: the correction has no `instruction`; logs written by a `Runner` "
            "(robocompose plan) carry it, a `CorrectionLog` needs context={'instruction': ...}."
        )
    before, after = record["plan_before"], record["plan_after"]
    if not before or (not after and edit["kind"] != "stop"):
        return None
    return CorrectionPair(
        instruction=record["instruction"],
        state=record["state"],
        wrong=parse_call(before[0]),
        corrected=parse_call(after[0]) if after else None,
        text=record["text"],
        done=tuple(parse_call(c) for c in record.get("done", [])),
        start_state=record.get("start_state") or {},
        plan_after=tuple(parse_call(c) for c in after),
        run=str(record.get("run", where)),
        time=float(record["time"]),
    )


@dataclass(frozen=True)
class CorrectedPlan:
    """A plan as the person left it: the calls that ran and the rest of the plan after its last
    correction (none after a stop), from the world the plan began in (logs without it: from its
    first correction)."""

    instruction: str
    state: dict[str, Any]
    calls: tuple[SkillCall, ...]
    corrections: int

    def example(self) -> Example:
        """This plan as a few-shot example of the planners (JSON calls and a program)."""
        code = "\n".join(
            f"{c.skill}({', '.join(repr(v) for v in c.args.values())})" for c in self.calls
        )
        return Example(
            scene=scene_summary(self.state),
            instruction=self.instruction,
            code=code,
            calls=tuple((c.skill, dict(c.args)) for c in self.calls),
        )


def corrected_plans(pairs: Sequence[CorrectionPair]) -> list[CorrectedPlan]:
    """One plan per run and plan (a repair round starts a new one: its `done` starts over);
    a plan left with no call (a stop its first correction) teaches no plan and is left out."""
    segments: list[list[CorrectionPair]] = []
    for _, group in itertools.groupby(pairs, key=lambda p: p.run):
        for pair in group:
            last = segments[-1][-1] if segments and segments[-1][-1].run == pair.run else None
            if last is None or pair.done[: len(last.done)] != last.done:
                segments.append([])
            segments[-1].append(pair)
    plans = [_plan(segment) for segment in segments]
    return [plan for plan in plans if plan.calls]


def _plan(segment: list[CorrectionPair]) -> CorrectedPlan:
    first, last = segment[0], segment[-1]
    rest = last.plan_after if last.corrected is not None else ()
    if first.start_state:
        return CorrectedPlan(first.instruction, first.start_state, last.done + rest, len(segment))
    ran = last.done[len(first.done) :]
    return CorrectedPlan(first.instruction, first.state, ran + rest, len(segment))


# -- the bank -------------------------------------------------------------------------------------
def _features(instruction: str) -> Counter[str]:
    words = [
        "<colour>" if w in COLOUR_WORDS else w for w in re.findall(r"[a-z]+", instruction.lower())
    ]
    return Counter(words + [f"{a} {b}" for a, b in itertools.pairwise(words)])


def _cosine(a: Counter[str], b: Counter[str], idf: dict[str, float]) -> float:
    dot = sum(a[t] * b[t] * idf.get(t, 1.0) ** 2 for t in a.keys() & b.keys())
    norm_a = math.sqrt(sum((v * idf.get(t, 1.0)) ** 2 for t, v in a.items()))
    norm_b = math.sqrt(sum((v * idf.get(t, 1.0)) ** 2 for t, v in b.items()))
    return dot / (norm_a * norm_b) if norm_a and norm_b else 0.0


class CorrectionBank:
    """Corrected plans, retrieved by how alike their instructions read to a new one."""

    def __init__(self, plans: Sequence[CorrectedPlan]) -> None:
        if not plans:
            raise ValueError("a correction bank needs at least one corrected plan.")
        self.plans = list(plans)
        self._features = [_features(p.instruction) for p in self.plans]
        counts = Counter(t for f in self._features for t in f)
        n = len(self.plans)
        self._idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in counts.items()}

    @classmethod
    def from_pairs(cls, pairs: Sequence[CorrectionPair]) -> CorrectionBank:
        return cls(corrected_plans(pairs))

    @classmethod
    def from_logs(cls, paths: Iterable[str | Path]) -> CorrectionBank:
        paths = list(paths)
        pairs = read_pairs(paths)
        if not pairs:
            raise ValueError(f"the correction logs {[str(p) for p in paths]} hold no applied call.")
        return cls.from_pairs(pairs)

    def nearest(self, instruction: str, k: int, env: str | None = None) -> list[CorrectedPlan]:
        """The `k` plans whose instructions are most alike, the most alike last (nearest to the
        question in the prompt); ties keep the bank's order. With `env` (a snapshot's "task",
        e.g. "Stack"), only plans made in scenes of that env: a sorting prompt gets no towers."""
        query = _features(instruction)
        scores = [_cosine(query, f, self._idf) for f in self._features]
        fits = [i for i, p in enumerate(self.plans) if env is None or p.state.get("task") == env]
        best = sorted(fits, key=lambda i: (-scores[i], i))[:k]
        return [self.plans[i] for i in reversed(best)]


class CorrectedPlanner:
    """A planner (skill list or code) whose few-shot examples are its own plus the `k` nearest
    corrected plans of `bank`: the high level fine-tuned by corrections, without weights."""

    def __init__(self, planner: Any, bank: CorrectionBank, k: int = 3) -> None:
        if k < 1:
            raise ValueError(f"`k` (corrected plans per prompt) must be >= 1. Got {k}.")
        self.planner, self.bank, self.k = planner, bank, k

    def examples(self, instruction: str, env: str | None = None) -> list[Example]:
        """The planner's own examples, then the nearest corrected plans made in `env`."""
        nearest = self.bank.nearest(instruction, self.k, env)
        return [*self.planner.examples, *(p.example() for p in nearest)]

    def plan(self, instruction: str, world_summary: Any, feedback: str | None = None) -> Plan:
        env = world_summary.get("task") if isinstance(world_summary, Mapping) else None
        shots = self.examples(instruction, env)
        return self.planner.plan(instruction, world_summary, feedback, examples=shots)


# -- `robocompose corrections` --------------------------------------------------------------------
@dataclass(kw_only=True)
class CorrectionsConfig:
    """`robocompose corrections LOG...`: the training pairs of correction logs, the corrected
    plans a planner's bank holds (`robocompose plan correction_logs=[...]` uses them), and the
    nearest ones for an instruction."""

    logs: list[str] = field(default_factory=list)  # correction logs (a run's corrections.jsonl)
    out: str = ""  # "" -> print only; else write the pairs there as JSONL
    instruction: str = ""  # show the bank's nearest corrected plans for this instruction
    k: int = 3  # how many nearest plans to show

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"`k` must be >= 1. Got {self.k}.")


def pair_record(pair: CorrectionPair) -> dict[str, Any]:
    """A pair as plain JSON: what a classifier or a fine-tuning run reads."""
    return {
        "instruction": pair.instruction,
        "state": pair.state,
        "done": [str(c) for c in pair.done],
        "wrong": str(pair.wrong),
        "corrected": str(pair.corrected) if pair.corrected is not None else None,
        "said": pair.text,
        "run": pair.run,
    }


def run_corrections(config: CorrectionsConfig) -> str:
    """Read the logs; write the pairs when `out` is set; a summary to print."""
    if not config.logs:
        raise ValueError("`logs` must name at least one correction log (a corrections.jsonl).")
    pairs = read_pairs(config.logs)
    plans = corrected_plans(pairs)
    lines = [
        f"{len(pairs)} corrections, {len(plans)} corrected plans from {len(config.logs)} log(s)"
    ]
    lines += [
        f"- {p.instruction!r}: {p.wrong} -> {p.corrected or 'stop'} ({p.text!r})" for p in pairs
    ]
    if config.out:
        out = Path(config.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(pair_record(p)) + "\n" for p in pairs))
        lines.append(f"pairs: {out}")
    if config.instruction and plans:
        lines.append(f"nearest corrected plans for {config.instruction!r}:")
        for plan in reversed(CorrectionBank(plans).nearest(config.instruction, config.k)):
            lines.append(f"  {plan.instruction!r}: " + ", ".join(str(c) for c in plan.calls))
    return "\n".join(lines)
