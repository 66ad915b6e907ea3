"""`robocompose serve`: a checkpoint or a composition behind the policy server, until Ctrl-C.

    robocompose serve --checkpoint PickPlace_flow_mlp port=8000
    robocompose serve Stack_diffusion_mlp Stack_flow_mlp \
        composition=convex --weights 0.3,0.7 api_key_env=MY_KEY
    robocompose serve --checkpoint C --host 0.0.0.0 api_key_env=MY_KEY \
        tls_cert=server.pem tls_key=server.key limits.max_connections=8

Serves until Ctrl-C, printing where it listens, who may connect and what it serves
(`robocompose.real_robot.serve.ServeConfig` builds the server). Light to import; the server
loads torch when `run` builds it.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from robocompose.real_robot.exposure import is_loopback

if TYPE_CHECKING:
    from robocompose.real_robot.serve import ServeConfig
    from robocompose.real_robot.websocket_server import PolicyServer

OPEN_WARNING = (
    "\n" + "!" * 78 + "\n"
    "!! WARNING: serving {host} WITHOUT AN API KEY (allow_open=true): any client that reaches\n"
    "!! this port may use the policy. Set api_key_env to require a key.\n" + "!" * 78
)


def announce(server: PolicyServer) -> None:
    """Print where the server listens, who may connect, where the audit log is, what it serves."""
    spec = server.policy.spec
    print(f"serving {spec.extra.get('policy', '')} on {server.address}")
    print(f"health: http{'s' if server.tls else ''}://{server.host}:{server.port}/healthz")
    if server.api_key:
        print("API key: required")
    elif is_loopback(server.host):
        print("API key: none (clients on this machine only)")
    else:
        print(OPEN_WARNING.format(host=server.host), file=sys.stderr)
        print("API key: NONE: OPEN TO THE NETWORK (allow_open=true)")
    if server.tls or is_loopback(server.host):
        print(f"TLS: {'on' if server.tls else 'off'}")
    else:
        print("TLS: OFF: the key and the observations cross the network in clear")
    print(f"audit log: {server.audit.path or 'none (audit_log=null)'}")
    print("limits: " + json.dumps(asdict(server.limits)))
    print("spec: " + json.dumps(spec.to_metadata(), indent=2), flush=True)


def run(config: ServeConfig) -> None:
    """Serve until SIGINT/SIGTERM; connections, refusals and error replies are logged."""
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
    for name in ("robocompose", "websockets"):
        logging.getLogger(name).setLevel(logging.INFO)
    config.server().serve_forever(on_ready=announce)
