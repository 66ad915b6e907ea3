"""The hardware bridge: a policy served over a websocket, and a robot side that runs it on an arm.

Where things are:

    serve.py             what the `serve` verb serves: ServeConfig (builds the PolicyServer)
    websocket_server.py  the transport: PolicyServer (openpi's protocol over a websocket)
    http_gate.py         what it answers over plain HTTP: /healthz, the API key check
    inference_worker.py  the policy on one worker thread, serialised, timed, under a deadline
    exposure.py, limits.py, ranges.py, audit.py
                         what keeps it safe on a network: no key without loopback or allow_open,
                         TLS; caps on connections, idle time, request rate; inputs and actions
                         held to the training range; the audit log
    loop_thread.py       where a server runs: a daemon thread, or until SIGINT/SIGTERM
    ports.py             PortInUse: a taken port and the process holding it
    policy_adapter.py    any checkpoint or composition as a ServedPolicy (load_served_policy)
    wire.py, obs_check.py, rtc.py
                         the msgpack format; observations checked against the spec; real-time
                         chunking guidance toward the committed prefix
    base.py              the two contracts: PolicySpec / ServedPolicy, and Arm
    client.py            PolicyClient: the robot side's connection to a policy server

    deploy.py            the `deploy` verb's loop: DeployConfig, deploy(config), DeployLoop
                         (commands from the loop at the executor's rate)
    deploy_io.py         what both deploy loops share: the tick clock, reading observations,
                         the policy/robot compatibility check
    process_loop.py      deploy with control=process: the policy side of a control process
    control.py           ControlProcess: starts the per-arm control process and talks to it
    control_loop.py      the loop inside it, at the arm's servo rate
    control_config.py    what both processes agree on: settings, default rates, ring layouts
    ring.py, trajectory.py
                         shared-memory ring buffers; timestamped waypoints and their trajectory
    executor.py          ChunkExecutor: which action each control tick gets (sync, ensemble, async)
    safety.py, safety_limits.py, safety_events.py
                         the SafetyLayer every command passes; per-robot limits; what it reports
    steplog.py           the step log (one JSON line per tick) and its bookkeeping
    replay.py            a step log as plots and a summary (the `replay` verb)
    timing_check.py      can this computer hold an arm's servo rate (`timing-check`, on the robot)
    drivers/             make_arm(robot, ...): the MuJoCo twin (drivers/twin.py) and the UR,
                         xArm and Franka drivers
    faults/              fault injection for tests and benchmarks: wrappers (injectors.py), the
                         runs on the deploy loop (loop.py) and on a control process (control.py)

Figures (latency, transport overhead, servo timing, fault table) are in
benchmarks/results/real_robot.json, written by benchmarks/real_robot.py.
"""
