"""`robocompose` command line: one entry point, one sub-command per verb.

Every verb reads `configs/<verb>.yaml` (with its groups: task/, policy/, composition/, search/,
sweep/, launcher/) and takes overrides in Hydra's grammar (quote brackets for the shell):

    robocompose compose task=PickPlace composition=mixture 'composition.weights=[0.3,0.7]'
    robocompose sweep -m composition=convex,mixture 'composition.weights=[0.3,0.7]' seed=0,1

Flags and positional arguments (`compose CKPT_A CKPT_B --weights 0.6,0.4`) are shorthands that
become the same overrides; `--cfg` prints the composed config instead of running. The verbs
themselves (config, `run`, flags) are the table in `robocompose.verbs`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import textwrap
from typing import Any

from robocompose.config import compose_all, load, to_tree
from robocompose.interrupt import ResumableInterrupt
from robocompose.notices import hide_developer_warnings
from robocompose.verbs import CONFIG_DIR, VERBS, Verb, imported


def load_verb_config(verb: str, overrides: list[str]) -> Any:
    """The verb's dataclass config from configs/<verb>.yaml and the overrides."""
    return load(verb, VERBS[verb].config_class(), overrides, VERBS[verb].adapt)


def _with_task_of_parents(name: str, verb: Verb, overrides: list[str]) -> list[str]:
    """Parents named without `task=` run on their own task (recorded in the first one's
    checkpoint), not on the config's default task."""
    fields = {f.name for f in dataclasses.fields(verb.config_class())}
    has_task = {"parents", "task"} <= fields
    if name == "sweep" or not has_task or any(o.startswith("task=") for o in overrides):
        return overrides
    tree = to_tree(compose_all(name, verb.config_class(), [overrides])[0])
    from robocompose.shipped import checkpoint_folder

    first = checkpoint_folder(tree["parents"][0]) if tree.get("parents") else None
    if first is None or not (first / "config.json").is_file():
        return overrides  # nothing to read; loading the parents will say what is wrong
    from robocompose.policies.checkpoint import read_checkpoint_config
    from robocompose.sim.tasks import get_task

    env_id = read_checkpoint_config(first)["metadata"].get("task")
    return [*overrides, f"task={get_task(env_id).name}"] if env_id else overrides


def _options(group: str) -> list[str]:
    from robocompose.config import group_options

    return group_options(group)


def _epilog(name: str, verb: Verb) -> str:
    """The verb's config: every field (type, default, description) and the group options."""
    from robocompose.config_help import config_fields, format_fields, wrap

    setters = f"robocompose/configs/{name}.yaml" + (" and its groups" if verb.groups else "")
    head = (
        f"config fields, set as key=value (defaults from the dataclass; {setters} may set "
        "others, --cfg prints what a run gets):"
    )
    fields = format_fields(config_fields(verb.config_class()), verb.groups)
    choices = verb.choices() if verb.choices else {}
    groups = [wrap(f"{g}: {', '.join(choices.get(g) or _options(g))}", 2, 4) for g in verb.groups]
    tail = ["config groups (group=option):", *groups] if groups else []
    return "\n".join([wrap(head), fields, *tail])


class VerbParser(argparse.ArgumentParser):
    """A verb's parser: its help lists the verb's config, imported only when help is asked."""

    verb = ""

    def format_help(self) -> str:
        if self.verb:
            self.epilog = _epilog(self.verb, VERBS[self.verb])
        return super().format_help()


def _verb_parser(name: str, verb: Verb, parser: VerbParser) -> None:
    parser.verb = name
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    what = f"; positional: {verb.positional.help}" if verb.positional else ""
    parser.add_argument("args", nargs="*", metavar="override", help=f"key=value{what}")
    for flag in (*verb.flags, CONFIG_DIR):
        if flag.switch:
            parser.add_argument(
                flag.flag, dest=flag.key, action="store_const", const="true", help=flag.help
            )
            continue
        parser.add_argument(flag.flag, dest=flag.key, help=f"= {flag.key}. {flag.help}".strip())
    parser.add_argument("--cfg", action="store_true", help="print the composed config and exit")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show other packages' deprecation warnings and import notices too",
    )
    if name == "sweep":
        parser.add_argument(
            "-m", "--multirun", action="store_true", help="as in Hydra (a sweep always expands)"
        )


class InstalledVersion(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (importing
    importlib.metadata would slow every command; benchmarks/cli_startup.py times startup)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib import metadata

        print(f"robocompose {metadata.version('robocompose')}")
        parser.exit()


def build_parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser (help, verb names) and one parser per verb."""
    parser = argparse.ArgumentParser(
        prog="robocompose",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=InstalledVersion)
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=VerbParser)
    subs = {}
    for name, verb in VERBS.items():
        subs[name] = verbs.add_parser(name, help=verb.help, description=textwrap.fill(verb.help))
        _verb_parser(name, verb, subs[name])
    return parser, subs


def _overrides(name: str, verb: Verb, args: argparse.Namespace) -> list[str]:
    """Shorthands first, then the overrides as typed (so a typed override wins)."""
    is_override = [a.startswith(("~", "+")) or "=" in a for a in args.args]
    positional = [a for a, o in zip(args.args, is_override, strict=True) if not o]
    typed = [a for a, o in zip(args.args, is_override, strict=True) if o]
    out = []
    if positional:
        if verb.positional is None or (len(positional) > 1 and not verb.many):
            raise ValueError(
                f"unexpected argument(s) {positional}: overrides look like key=value "
                f"(see `robocompose {name} --help`)."
            )
        value = positional if verb.many else positional[0]
        out.append(verb.positional.override(value))
    for flag in (*verb.flags, CONFIG_DIR):
        value = getattr(args, flag.key)
        if value is not None:
            out.append(flag.override(value))
    return out + typed


def _show(name: str, verb: Verb, overrides: list[str]) -> str:
    from omegaconf import OmegaConf

    if name == "sweep":
        from robocompose.sweep.config import plan

        sweep_plan = plan(overrides, require_axes=False)
        head = f"# {len(sweep_plan.cells)} cells over axes {sweep_plan.axes}\n"
        if not sweep_plan.axes:
            head = (
                "# no axes yet: add one to run, e.g. composition=convex,mixture "
                "or sweep=operators\n"
            )
        return head + OmegaConf.to_yaml(sweep_plan.tree)
    return OmegaConf.to_yaml(to_tree(compose_all(name, verb.config_class(), [overrides])[0]))


def _negative_values_attached(argv: list[str], verb: Verb) -> list[str]:
    """`--weights -0.5,1.5` as `--weights=-0.5,1.5`: argparse takes a value that starts with
    `-` for a flag unless it is one plain number."""
    takes_value = {f.flag for f in verb.flags if not f.switch}
    out: list[str] = []
    for token in argv:
        if out and out[-1] in takes_value and re.fullmatch(r"-[\d.][\d.,eE+-]*", token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, subs = build_parsers()
    if not argv or argv[0] not in subs:
        parser.parse_args(argv)  # help, or the list of verbs
    name, verb = argv[0], VERBS[argv[0]]
    argv = _negative_values_attached(argv, verb)
    args = subs[name].parse_intermixed_args(argv[1:])  # flags and overrides in any order
    if not args.verbose:
        hide_developer_warnings()
    try:
        overrides = _with_task_of_parents(name, verb, _overrides(name, verb, args))
        if args.cfg:
            print(_show(name, verb, overrides), end="")
            return
        # the config first: a config error before the verb imports torch
        if verb.build:
            config = imported(verb.build)(overrides)
        else:
            config = load_verb_config(name, overrides)
        imported(verb.run)(config)
    except KeyboardInterrupt as e:  # Ctrl-C: what is saved (a `ResumableInterrupt`), no traceback
        print(
            f"\nrobocompose {name}: {e if isinstance(e, ResumableInterrupt) else 'interrupted'}",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    except Exception as e:
        if not verb.is_user_error(e):
            raise
        raise SystemExit(f"robocompose {name}: error: {e}") from None


if __name__ == "__main__":
    main()
