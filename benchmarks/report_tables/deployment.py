"""Tables of docs/results/deployment.md: the robot loop, serving, the control process, faults
and the fleet."""

from __future__ import annotations

from report_tables import fmt


def control_loop() -> str:
    rows = [
        (
            f"{r['rate_hz']:g}",
            r["ticks"],
            f"{r['achieved_hz']:.2f}",
            fmt.spread(r["period_error_ms"]),
            r["ticks_late_over_half_period"],
        )
        for r in fmt.read("real_robot.json")["control_loop"]
    ]
    return fmt.table(
        (
            "rate Hz",
            "ticks",
            "achieved Hz",
            "|period error| ms p50 / p99 / max",
            "ticks over half a period late",
        ),
        rows,
    )


def transport() -> str:
    d = fmt.read("real_robot.json")
    rows = [
        (
            "in-process server, loopback",
            *(fmt.spread(d["transport"][k]) for k in ("round_trip_ms", "infer_ms", "overhead_ms")),
        )
    ]
    t = d.get("control_process_transport", {})
    for name in ("zero_cost", "flow_mlp"):
        if name in t:
            rows.append(
                (
                    f"openpi-client in a process, {name.replace('_', ' ')} policy",
                    *(fmt.spread(t[name][k]) for k in ("round_trip_ms", "infer_ms", "overhead_ms")),
                )
            )
    return fmt.table(("path", "round trip ms p50 / p99 / max", "inference ms", "overhead ms"), rows)


def _success(key: str) -> str:
    d = fmt.read("real_robot.json")[key]
    rows = [("direct evaluation (harness)", d["direct"]["text"], "-")]
    rows += [
        (f"served, {mode}", r["text"], f"{r['waited_s_per_episode']:.2f} s")
        for mode, r in d["modes"].items()
    ]
    intro = f"{d['policy']}, {d['episodes']} seeds from {d['seed_start']}, {d['rate_hz']:g} Hz:\n\n"
    return intro + fmt.table(("path", "success [95% CI]", "waiting per episode (sim time)"), rows)


def deploy_success() -> str:
    return _success("success")


def control_success() -> str:
    return _success("control_process_success")


def smoothness() -> str:
    rows = [
        (
            r["mode"],
            r["latency_ms"],
            fmt.pct(r["idle_fraction"]),
            f"{r['longest_pause_s']:.1f}",
            f"{1000 * r['boundary_kink_m']['p50']:.1f} / {1000 * r['boundary_kink_m']['max']:.1f}",
            f"{r['jerk_m_s3']['p99']:.0f}",
        )
        for r in fmt.read("real_robot.json")["smoothness"]
    ]
    return fmt.table(
        (
            "mode",
            "injected latency ms",
            "idle (share of ticks)",
            "longest pause s",
            "kink at chunk joins p50 / max mm",
            "jerk p99 m/s³",
        ),
        rows,
    )


def faults() -> str:
    rows = [
        (
            r["fault"],
            r["injected"],
            r["commands"],
            r["commands_outside_limits"],
            f"{r['hold_latency_ms']['p50']:.0f} ms"
            if r["hold_latency_ms"]["p50"] is not None
            else "-",
            "yes" if r["resumed"] else "no",
            r["reconnects"],
        )
        for r in fmt.read("real_robot.json")["faults"]
    ]
    return fmt.table(
        (
            "fault",
            "injected",
            "commands to the arm",
            "outside the limits",
            "hold after the last command",
            "resumed",
            "reconnects",
        ),
        rows,
    )


def control_timing() -> str:
    d = fmt.read("real_robot.json")["control_process_timing"]
    rows = [
        (
            r["arm"],
            f"{r['rate_hz']:g}",
            "yes" if r["granted"]["fifo"] else "no",
            r["load"],
            fmt.spread(r["period_error_ms"], 4),
            r["ticks_missed"],
        )
        for r in d["rows"]
    ]
    intro = f"{d['seconds_per_row']:g} s a row, a policy thread streaming waypoints at 10 Hz:\n\n"
    return intro + fmt.table(
        ("arm", "rate Hz", "SCHED_FIFO", "load", "period error ms p50 / p99 / max", "ticks missed"),
        rows,
    )


def control_tracking() -> str:
    rows = [
        (
            f"{r['rate_hz']:g}",
            r["interpolation"],
            fmt.spread(r["executed_vs_planned_mm"], 1),
            fmt.spread(r["sent_vs_planned_mm"], 1),
            fmt.pct(r["clamped_tick_fraction"]),
        )
        for r in fmt.read("real_robot.json")["control_process_tracking"]
    ]
    return fmt.table(
        (
            "control rate Hz",
            "interpolation",
            "measured - plan mm p50 / p99 / max",
            "sent - plan mm",
            "ticks clamped",
        ),
        rows,
    )


def control_faults() -> str:
    rows = []
    for r in fmt.read("real_robot.json")["control_process_faults"]:
        hold = (
            r["hold_after_last_fresh_waypoint_ms"]["p50"] or r["hold_after_last_command_ms"]["p50"]
        )
        events = ", ".join(f"`{k}` x{v}" for k, v in r["events"].items())
        rows.append(
            (
                r["fault"],
                r["injected"],
                r["commands"],
                r["commands_outside_limits"],
                "-" if hold is None else f"{hold:.0f} ms",
                events,
                "yes" if r["resumed"] else "no",
            )
        )
    return fmt.table(
        (
            "fault",
            "injected",
            "commands to the arm",
            "outside the limits",
            "hold after the last waypoint (p50)",
            "what the log says",
            "resumed",
        ),
        rows,
    )


def fleet() -> str:
    """Many robots on one server: serial against batched, whatever rows the run recorded."""
    rows = fmt.read("real_robot.json")["fleet"]
    keys = [k for k in rows[0] if not isinstance(rows[0][k], (dict, list))]
    return fmt.table(keys, ([r.get(k, "-") for k in keys] for r in rows))


TABLES = (
    control_loop,
    transport,
    deploy_success,
    control_success,
    smoothness,
    faults,
    control_timing,
    control_tracking,
    control_faults,
    fleet,
)
