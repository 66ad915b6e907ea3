"""`robocompose serve`: a checkpoint or a composition behind the policy server, until Ctrl-C.

    robocompose serve --checkpoint checkpoints/PickPlace_flow_mlp port=8000
    robocompose serve checkpoints/Stack_diffusion_mlp checkpoints/Stack_flow_mlp \
        composition=convex --weights 0.3,0.7 api_key_env=MY_KEY
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from robocompose.devices import check_device
from robocompose.rollout_config import CompositionSpec

if TYPE_CHECKING:  # the server needs the `robot` extra and torch; the config neither
    from robocompose.real_robot.base import ServedPolicy
    from robocompose.real_robot.policy_adapter import DenoiserServedPolicy
    from robocompose.real_robot.rtc import PrefixGuidance
    from robocompose.real_robot.websocket_server import PolicyServer


@dataclass(kw_only=True)
class ServeConfig:
    """What to serve (`checkpoint`, or >= 2 `parents` composed by `composition`; operator
    "merge" merges their parameters) and where. The API key is `api_key`, else the value of the
    environment variable `api_key_env` when set; with neither the server takes any client."""

    checkpoint: str | None = None
    parents: list[str] = field(default_factory=list)
    composition: CompositionSpec = field(default_factory=CompositionSpec)
    steps: int | None = None  # denoising steps of a checkpoint or merge (None: its own);
    # a composition's are `composition.steps`
    # actions of each chunk a client executes, of a checkpoint or merge (None: as trained); a
    # composition's are `composition.n_action_steps`
    n_action_steps: int | None = None
    host: str = "127.0.0.1"
    port: int = 8000  # 0: any free port (printed)
    api_key: str | None = None
    api_key_env: str = "ROBOCOMPOSE_API_KEY"
    delay_s: float = 0.0  # injected before every inference (`LatencyInjector`): latency tests only
    control_hz: float | None = None  # None: the task env's control rate
    rtc_mode: str = "soft"  # real-time chunking guidance toward `prefix_actions`: hard or soft
    rtc_prefix_weight: float = 1.0  # soft mode: weight on the committed prefix, in (0, 1]
    device: str = "auto"  # auto (CUDA if present), cpu, cuda, cuda:N or mps

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (not self.parents):
            raise ValueError(
                "give either `checkpoint` or >= 2 `parents` to compose. "
                f"Got checkpoint={self.checkpoint!r}, parents={self.parents}."
            )
        if len(self.parents) == 1:
            raise ValueError(
                f"`parents` must name >= 2 checkpoints (serve one with checkpoint=PATH). "
                f"Got {self.parents}."
            )
        if self.parents:
            self.composition.check_parent_count(len(self.parents))
        if not 0 <= self.port <= 65535:
            raise ValueError(f"`port` must be in [0, 65535]. Got {self.port}.")
        if not 0.0 <= self.delay_s <= 60.0:
            raise ValueError(f"`delay_s` must be in [0, 60]. Got {self.delay_s}.")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"`steps` must be >= 1 or None. Got {self.steps}.")
        if self.control_hz is not None and self.control_hz <= 0:
            raise ValueError(f"`control_hz` must be > 0. Got {self.control_hz}.")
        from robocompose.real_robot.rtc import GUIDANCE_MODES

        if self.rtc_mode not in GUIDANCE_MODES:
            raise ValueError(f"`rtc_mode` must be one of {GUIDANCE_MODES}. Got {self.rtc_mode!r}.")
        self.guidance()  # validates rtc_prefix_weight
        check_device(self.device)

    def guidance(self) -> PrefixGuidance:
        from robocompose.real_robot.rtc import PrefixGuidance

        return PrefixGuidance(self.rtc_mode, self.rtc_prefix_weight)

    def key(self) -> str | None:
        return self.api_key or os.environ.get(self.api_key_env) or None

    def served_policy(self) -> DenoiserServedPolicy:
        from robocompose.real_robot.policy_adapter import load_served_policy

        spec = self.composition
        one_network = self.checkpoint is not None or spec.method().merges_parameters
        # a composition takes its steps (and sampler) from `composition`
        sampling = (
            {"steps": self.steps, "n_action_steps": self.n_action_steps}
            if one_network
            else spec.settings()
        )
        return load_served_policy(
            self.checkpoint,
            self.parents,
            spec.operator,
            spec.weights,
            guidance=self.guidance(),
            control_hz=self.control_hz,
            device=self.device,
            **sampling,
        )

    def server(self) -> PolicyServer:
        try:
            from robocompose.real_robot.websocket_server import PolicyServer
        except ImportError as e:
            raise ValueError(
                f"the policy server needs the `robot` extra ({e}): pip install -e '.[robot]'"
            ) from None
        policy: ServedPolicy = self.served_policy()
        if self.delay_s > 0:
            from robocompose.real_robot.faults.injectors import LatencyInjector

            policy = LatencyInjector(policy, self.delay_s)
        return PolicyServer(policy, host=self.host, port=self.port, api_key=self.key())


def announce(server: PolicyServer) -> None:
    """Print where the server listens and what it serves."""
    spec = server.policy.spec
    print(f"serving {spec.extra.get('policy', '')} on {server.address}")
    print(f"health: http://{server.host}:{server.port}/healthz")
    print("API key: " + ("required" if server.api_key else "none (any client may connect)"))
    print("spec: " + json.dumps(spec.to_metadata(), indent=2), flush=True)


def run(config: ServeConfig) -> None:
    """Serve until SIGINT/SIGTERM; connections, refusals and error replies are logged."""
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
    for name in ("robocompose", "websockets"):
        logging.getLogger(name).setLevel(logging.INFO)
    config.server().serve_forever(on_ready=announce)
