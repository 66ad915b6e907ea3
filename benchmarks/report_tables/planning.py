"""Tables of docs/results/planning.md: the LLM planners, Language to Rewards, learned skills."""

from __future__ import annotations

from report_tables import fmt

QWEN = "qwen2.5-coder-1.5b"


def plans() -> str:
    """Both long-horizon categories, every phrasing, one repair round."""
    rows = []
    for model, by_planner in fmt.read("hierarchical.json")["plans"].items():
        for planner, tasks in by_planner.items():
            a = tasks.get("all", {})
            rows.append(
                [
                    model,
                    planner,
                    *(
                        a.get(k, {}).get("text", "-")
                        for k in ("valid_plan", "success_no_repair", "success_with_repair")
                    ),
                ]
            )
    return fmt.table(
        ("model", "planner", "valid plan", "success, no repair", "success, 1 repair round"), rows
    )


def plan_faults() -> str:
    d = fmt.read("hierarchical.json")["faults"]
    rows = []
    for model, faults in d.items():
        for fault, r in faults.items():
            if isinstance(r, dict) and "recovery" in r:
                rows.append(
                    [
                        model,
                        fault,
                        r["recovery"]["text"],
                        r["reference_success_despite_fault"]["text"],
                    ]
                )
    return fmt.table(("model", "fault", "recovered with repair", "reference program alone"), rows)


def categories() -> str:
    """Per category (the JSON's "families") and planner on the test collection."""
    results = fmt.read("hierarchical.json")
    fam = results["families"][QWEN]
    # the goal planner under each setting (named by its readers and adapter file), then the rest
    shown = sorted(p for p in fam if p.startswith("goal")) + [
        p for p in ("skills", "code", "saycan") if p in fam
    ]
    names = list(fam[shown[0]])
    rows = [
        [f, *(fam[p].get(f, {}).get("success", {}).get("text", "not run") for p in shown)]
        for f in names
    ]
    outcome = results["outcomes"][QWEN]
    for name in ("right", "wrong", "asked_or_refused"):
        rows.append(
            [f"all feasible: {name.replace('_', ' ')}", *(outcome[p][name]["text"] for p in shown)]
        )
    stopped = [results["refusals"][QWEN][p] for p in shown]
    rows.append(
        [
            "infeasible: refused or asked",
            *(f"{r['refused_or_asked']['text']}, {r['robot_calls']} robot calls" for r in stopped),
        ]
    )
    return fmt.table(("category", *shown), rows)


def goal_rewrite() -> str:
    """The rewrite alone, judged against the gold, per split and variant."""
    d = fmt.read("goal_rewrite.json")
    keys = ("right_feasible", "wrong_feasible", "asked_feasible", "refused_or_asked_infeasible")
    rows = []
    for run, variants in d.items():
        if run == "agreement":
            continue
        for variant, r in variants.items():
            if isinstance(r, dict) and "right_feasible" in r:
                rows.append([run, variant, *(r[k]["text"] for k in keys)])
    for r in d.get("agreement", {}).values():
        rows.append(
            [f"{r['first']} checked by {r['second']}", "agreement", *(r[k]["text"] for k in keys)]
        )
    return fmt.table(
        ("run", "variant", "right", "wrong", "asked", "infeasible refused or asked"), rows
    )


def plan_latency() -> str:
    d = fmt.read("plan_latency.json")
    rows = []
    for setting, r in d["processes"]["goal"].items():
        f, later = r["first_plan"], r["later_plans"]
        load = r.get("load_avg_1min", [])
        rows.append(
            [
                setting,
                f"{f['process_seconds_p50']:.2f} / {f['process_seconds_p90']:.2f}",
                f"{f['plan_seconds_p50']:.2f} / {f['plan_seconds_p90']:.2f}",
                f"{later['plan_seconds_p50']:.2f} / {later['plan_seconds_p90']:.2f}",
                f"{f['prompt_tokens_evaluated_mean']:.0f} of {f['prompt_tokens_mean']:.0f}",
                f"{f['model_load_seconds_p50']:.2f}" if "model_load_seconds_p50" in f else "-",
                f"{min(load):.1f}-{max(load):.1f}" if load else "-",
            ]
        )
    header = (
        "goal planner setting",
        "first plan from the shell, p50 / p90 s",
        "its planning call",
        "later plans in the process",
        "prompt tokens evaluated (first plan)",
        "model load s",
        "1-min load",
    )
    p = d["prompt_lookup"]
    lookup = (
        f"\n\nPrompt-lookup decoding ({p['draft_tokens']} draft tokens, {p['timed']} timed "
        f"requests): median {p['prompt_lookup']['median_seconds']:.2f} s against "
        f"{p['plain']['median_seconds']:.2f} s plain ({p['median_ratio_lookup_to_plain']:.2f}x), "
        f"same answers: {p['same_outputs']}."
    )
    return fmt.table(header, rows) + lookup


def goal_planning() -> str:
    d = fmt.read("goal_planning.json")
    rows = []
    for scene, s in d["scenes"].items():
        cells = [scene, s["configurations"]]
        for engine in ("pyperplan", "fast-downward"):
            e = s["engines"].get(engine)
            cells.append(f"{1000 * e['median_s']:.1f} ms ({e['shortest']} shortest)" if e else "-")
        cells.append(f"{1000 * s['solver']['median_s']:.1f} ms")
        rows.append(cells)
    first = ", ".join(f"{k} {v:g} s" for k, v in d["first_call_s"].items())
    intro = (
        f"{d['pairs_per_scene']} random start/goal pairs a scene, load average "
        f"{d['load_average_1min']:.1f}; first call in a process: {first}.\n\n"
    )
    return intro + fmt.table(
        ("scene", "configurations", "pyperplan median", "Fast Downward median", "solver median"),
        rows,
    )


def sandbox() -> str:
    d = fmt.read("sandbox.json")
    rows = [
        (k.removesuffix("_ms").replace("_", " "), f"{v:.2f}")
        for k, v in d.items()
        if k.endswith("_ms")
    ]
    return fmt.table(("step", "ms"), rows)


def corrections() -> str:
    d = fmt.read("skills.json")["corrections_finetune"][QWEN]
    rows = []
    for split, s in d["splits"].items():
        for part, r in s.items():
            if isinstance(r, dict) and "before" in r:
                rows.append(
                    [
                        f"{split.replace('_', ' ')}: {part.replace('_', ' ')}",
                        r["before"]["text"],
                        r["after"]["text"],
                        r["paired_difference"]["text"],
                    ]
                )
    t = d["training"]
    intro = (
        f"Bank: {t['spoken']} corrections spoken on {t['runs_corrected']} of {t['items']} "
        f"items.\n\n"
    )
    return intro + fmt.table(("split", "before", "after", "after - before"), rows)


def goal_reading() -> str:
    d = fmt.read("hierarchical.json")
    rows = []
    for model, splits in d.get("reading", {}).items():
        for split, settings in splits.items():
            for setting, r in settings.items():
                rows.append(_reading_row(model, split, setting, r))
    for model, settings in d.get("unseen_names", {}).items():
        for setting, r in settings.items():
            rows.append(_reading_row(model, "test, unseen names", setting, r))
    header = ("model", "items", "goal planner", "right", "wrong", "asked / refused",
              "infeasible items it moved on")  # fmt: skip
    return fmt.table(header, rows)


def goal_reading_kinds() -> str:
    d = fmt.read("hierarchical.json")
    runs = [
        (split, setting, r)
        for splits in d.get("reading", {}).values()
        for split, settings in splits.items()
        for setting, r in settings.items()
    ]
    runs += [
        ("test, unseen names", setting, r)
        for settings in d.get("unseen_names", {}).values()
        for setting, r in settings.items()
    ]
    rows = []
    for split, setting, r in runs:
        if "per_wording" not in r:
            continue
        q = r.get("questions") or {}
        asked = f"{q['needed']} of {q['asked']}" if q else "-"
        for kind, c in r["per_wording"].items():
            rows.append(
                [
                    split,
                    setting,
                    kind,
                    c["n"],
                    c["right"],
                    c["wrong"],
                    c["asked_or_refused"],
                    asked,
                ]
            )
    header = (
        "items",
        "goal planner",
        "wording",
        "feasible items",
        "right",
        "wrong",
        "asked / refused",
        "questions a person needed (of all asked)",
    )
    return fmt.table(header, rows)  # fmt: skip


def _reading_row(model: str, split: str, setting: str, r: dict) -> list[object]:
    moved = f"{r['infeasible_moved']} of {r['infeasible_n']}"
    return [model, split, setting, r["right"]["text"], r["wrong"]["text"],
            r["asked_or_refused"]["text"], moved]  # fmt: skip


def goal_corpus() -> str:
    d = fmt.read("goal_corpus.json")
    leak = d["leak_check"]
    intro = (
        f"{d['pairs']} pairs ({d['feasible']} feasible), {d['distinct_3grams']} distinct 3-grams "
        f"of the lifted requests, built in {d['seconds']:.0f} s; shared with the test split "
        f"({leak['test_sentences']} sentences, {leak['test_5grams']} lifted 5-grams): "
        f"{leak['shared_sentences']} sentences, {leak['shared_5grams']} 5-grams"
        + (
            f"; with the wordings collection ({w['wordings_sentences']} sentences): "
            f"{w['shared_sentences']} sentences, {w['shared_5grams']} 5-grams"
            if (w := d.get("leak_check_wordings"))
            else ""
        )
        + ". Languages: "
        + ", ".join(f"{k} {v}" for k, v in d["languages"].items())
        + ".\n\n"
    )
    rows = [[kind, n] for kind, n in d["wordings_per_relation"].items()]
    return intro + fmt.table(("kind of goal", "sentences"), rows) + _paraphrases(d)


def _paraphrases(d: dict) -> str:
    p = d.get("paraphrases")
    if not p:
        return ""
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(p["verdicts"].items()))
    leak = p["leak_check"]
    return (
        f"\n\nParaphrases by the local model: {p['sources']} source requests rewritten, "
        f"{sum(p['verdicts'].values())} rewrites ({verdicts}); {p['kept']} kept, which share "
        f"{leak['shared_sentences']} sentences and {leak['shared_5grams']} lifted 5-grams with the "
        f"test split; with them the corpus has {p['distinct_3grams_with_them']} distinct 3-grams."
    )


def language_to_rewards() -> str:
    d = fmt.read("skills.json")["language_to_rewards"]
    rows = []
    for instruction, r in d["instructions"].items():
        diff = r["mpc_minus_scripted"]
        rows.append(
            [
                instruction,
                r["llm_matches_reference"],
                r["mpc"]["text"],
                r["scripted"]["text"],
                fmt.points(diff),
                f"{r['mpc']['seconds_per_episode']:.1f}",
            ]
        )
    header = (
        "instruction",
        "LLM's reward as meant",
        "MPC on the LLM's reward",
        "scripted baseline",
        "MPC - scripted (paired)",
        "s / episode",
    )
    return f"Model: {d['model']}.\n\n" + fmt.table(header, rows)


SKILLS = ("pick", "place_on", "place_on_stack", "place_in")


def _skill_table(key: str) -> str:
    d = fmt.read("skills.json")[key]
    names = list(d["pair"])
    rows = []
    for skill in SKILLS:
        s = d[skill]
        rows.append(
            [
                skill,
                *(s[n]["text"] for n in names),
                s["composed"]["text"],
                fmt.points(s["composed_minus_better"]),
            ]
        )
    pair = ", ".join(f"{n} = {c}" for n, c in d["pair"].items())
    return f"{pair}:\n\n" + fmt.table(
        ("skill", *names, "composition", "composition - better"), rows
    )


def skill_policies() -> str:
    return _skill_table("skill_policies")


def skill_policies_flow_pair() -> str:
    return _skill_table("skill_policies_flow_pair")


def skill_language() -> str:
    d = fmt.read("skills.json")["skill_language"]
    rows = [
        [s, d[s]["tokens"]["text"], d[s]["minilm"]["text"], fmt.points(d[s]["minilm_minus_tokens"])]
        for s in SKILLS
        if s in d
    ]
    return fmt.table(("skill", "learned tokens", "MiniLM embeddings", "MiniLM - tokens"), rows)


def long_horizon() -> str:
    d = fmt.read("skills.json")
    lh = d["long_horizon_skills"]
    rows = [
        [k.replace("_", " "), lh[k]["stack_three"]["text"], lh[k]["sort_by_colour"]["text"]]
        for k in lh["specs"]
    ]
    p = d["planner_learned_skills"]
    rows.append(
        [
            f"{p['planner']} planner + learned skills",
            p["stack_three"]["text"],
            p["sort_by_colour"]["text"],
        ]
    )
    return fmt.table(("skills", "stack_three", "sort_by_colour"), rows)


TABLES = (
    plans,
    plan_faults,
    categories,
    goal_rewrite,
    goal_reading,
    goal_reading_kinds,
    goal_corpus,
    plan_latency,
    goal_planning,
    sandbox,
    corrections,
    language_to_rewards,
    skill_policies,
    skill_policies_flow_pair,
    skill_language,
    long_horizon,
)
