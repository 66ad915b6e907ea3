"""What `robocompose serve` serves, where and to whom (`ServeConfig`; the verb is
`robocompose.verbs.serve`): a checkpoint or a composition behind the policy server.

It fails closed: a key variable that is named but unset or empty is an error, and a host other
than loopback without a key is refused unless `allow_open=true`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from robocompose.devices import check_device
from robocompose.real_robot.audit import AuditLog
from robocompose.real_robot.exposure import (
    check_exposure,
    check_tls_files,
    tls_context,
)
from robocompose.real_robot.inference_worker import check_batching
from robocompose.real_robot.limits import ServerLimits
from robocompose.rollout_config import CompositionSpec

DEFAULT_KEY_ENV = "ROBOCOMPOSE_API_KEY"
if TYPE_CHECKING:  # the server needs the `robot` extra and torch; the config neither
    from robocompose.real_robot.base import ServedPolicy
    from robocompose.real_robot.policy_adapter import DenoiserServedPolicy
    from robocompose.real_robot.rtc import PrefixGuidance
    from robocompose.real_robot.websocket_server import PolicyServer


@dataclass(kw_only=True)
class ServeConfig:
    """What to serve (`checkpoint`, or >= 2 `parents` composed by `composition`; operator
    "merge" merges their parameters), where, and to whom. The API key is `api_key`, else the
    value of the environment variable `api_key_env` (which must then be set and non-empty), else
    that of ROBOCOMPOSE_API_KEY when set; with none, only clients on this machine may connect
    unless `allow_open`."""

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
    api_key: str | None = None  # the key clients must send (api_key_env keeps it out of `ps`)
    # environment variable holding the key, which must be set and non-empty (None:
    # ROBOCOMPOSE_API_KEY when set)
    api_key_env: str | None = None
    allow_open: bool = False  # serve a non-loopback host without a key: anyone may connect
    tls_cert: str | None = None  # PEM certificate (chain): serve wss:// (with `tls_key`)
    tls_key: str | None = None  # PEM private key of `tls_cert`
    # JSON lines of connections, auth results, refusals and errors (never a key or an
    # observation); None: none
    audit_log: str | None = "runs/serve/audit.jsonl"
    limits: ServerLimits = field(default_factory=ServerLimits)
    # requests run as one batch, for a fleet of robots; 1: one at a time, each reply identical to
    # serving its client alone (batched: to float error)
    max_batch: int = 1
    batch_window_s: float = 0.0  # how long a batch waits for more requests (0: those queued)
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
        if self.api_key is not None and (self.api_key == "" or self.api_key_env is not None):
            raise ValueError(
                "give one non-empty key: `api_key` or `api_key_env`. "
                f"Got api_key={'(empty)' if self.api_key == '' else '(set)'}, "
                f"api_key_env={self.api_key_env!r}."
            )
        check_exposure(self.host, self.key(), self.allow_open)
        check_tls_files(self.tls_cert, self.tls_key)
        check_batching(self.max_batch, self.batch_window_s, self.limits.deadline_s)

    def guidance(self) -> PrefixGuidance:
        from robocompose.real_robot.rtc import PrefixGuidance

        return PrefixGuidance(self.rtc_mode, self.rtc_prefix_weight)

    def key(self) -> str | None:
        """The API key clients must send; a named variable that is unset or empty is an error."""
        if self.api_key is not None:
            return self.api_key
        name = self.api_key_env or DEFAULT_KEY_ENV
        value = os.environ.get(name)
        if value is None and self.api_key_env is None:
            return None
        if not value or not value.strip():
            raise ValueError(
                f"the API key variable {name} is {'not set' if value is None else 'empty'}: "
                f"export the key in it (`api_key_env` names where it is read)."
            )
        return value

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
        tls = None if self.tls_cert is None else tls_context(self.tls_cert, str(self.tls_key))
        policy: ServedPolicy = self.served_policy()
        if self.delay_s > 0:
            from robocompose.real_robot.faults.injectors import LatencyInjector

            policy = LatencyInjector(policy, self.delay_s)
        return PolicyServer(
            policy,
            host=self.host,
            port=self.port,
            api_key=self.key(),
            allow_open=self.allow_open,
            tls=tls,
            limits=self.limits,
            audit=AuditLog(self.audit_log),
            max_batch=self.max_batch,
            batch_window_s=self.batch_window_s,
        )
