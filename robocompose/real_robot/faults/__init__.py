"""Fault injection on loopback with the twin, for tests and benchmarks: real parts, real faults.

Where things are:

    injectors.py  the faults as wrappers around real parts: LatencyInjector (a slow or stalled
                  policy), FaultyServer (a PolicyServer that crashes and comes back), TcpRelay
                  (a network that drops every connection), CorruptingPolicy, MalformingSource,
                  FaultyControl (late, corrupted or overrunning waypoints)
    loop.py       FAULTS and run_fault: one episode of the deploy loop with a fault injected
    control.py    CONTROL_FAULTS and run_control_fault: the same through a control process
    report.py     FaultReport, and what reached the arm (RecordingArm, received_from_telemetry)
                  with the checks on it

Nothing here is imported by the serving or deploy paths, except `LatencyInjector` by the serve
verb's `delay_s` (latency tests).
"""
