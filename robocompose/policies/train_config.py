"""The `train` verb's config, kept free of torch so the CLI can validate overrides without loading
it; the verb itself is `robocompose.verbs.train`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from robocompose.choices import check_choices, one_of
from robocompose.devices import check_device
from robocompose.policies.config import PolicyConfig
from robocompose.sim.task_config import TaskConfig

# Curves live in their own subfolder: the run folder's top level stays the checkpoint a loader
# reads, and the folder name says which tool opens it.
EVENTS_DIR = "tensorboard"
AMP_MODES = ("off", "bf16", "fp16")
CHECKPOINT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass
class TrainConfig:
    dataset: str
    out: str
    # more demo files trained on with `dataset` (e.g. one per scene variant); `dataset` names
    # the task and env kwargs, the normalisers are fitted to all of them
    extra_datasets: list[str] = field(default_factory=list)
    # train on windows inside one skill segment (the files' per-step `skills` labels), each with
    # its skill's language tokens as the obs key `skill_tokens` (robocompose.sim.skill_labels)
    skill_windows: bool = False
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    # the env of a dataset whose own (`env_args.env_name`) is not registered (a file of another
    # suite): `task=<preset>` records that task in the checkpoint
    task: TaskConfig | None = None
    steps: int = 10_000
    batch_size: int = 256
    lr: float = 3e-4
    weight_decay: float = 1e-6
    warmup_steps: int = 500
    ema_decay: float = 0.999
    # clip the total gradient L2 norm to this (Diffusion Policy-style training); None: no clip
    grad_clip: float | None = None
    checkpoint_every: int = 1000
    log_every: int = 50  # TensorBoard scalars every this many steps
    # success of the EMA weights on the dataset's task every this many steps (0: never)
    eval_every: int = 0
    eval_episodes: int = 10  # episodes per evaluation, seeds 100000 on
    seed: int = 0
    demo_offset: int = 0  # train on demos [demo_offset, demo_offset + max_demos)
    max_demos: int | None = None
    # a checkpoint folder whose action normaliser to use instead of fitting one to `dataset`:
    # a policy trained on another file then acts in that checkpoint's action space and composes
    # with it exactly (no `allow_normalizer_mismatch`)
    action_normalizer_from: str | None = None
    # torch's intra-op threads while training (restored after); None: torch's default, one per
    # core. One by default, as evaluation: more gain little on small batches and stall whenever
    # another job wants a core (benchmarks/results/train_threads.json)
    torch_threads: int | None = 1
    # leave out demos holding NaN or inf (a warning names them) instead of refusing the file
    skip_nonfinite_demos: bool = False
    # the inference checkpoint's weight dtype: float16 halves what the repo ships
    checkpoint_dtype: str = one_of(CHECKPOINT_DTYPES, "float32")
    device: str = "auto"  # auto (CUDA if present), cpu, cuda, cuda:N or mps
    # mixed precision: off, bf16 (autocast to bfloat16; the choice on CUDA, and on a CPU it
    # runs matmuls in bfloat16, fast only on CPUs with native bf16) or fp16 (CUDA only, with
    # loss scaling). In a YAML file write "off" quoted: bare off is YAML's false.
    amp: str = one_of(AMP_MODES, "off")

    def __post_init__(self) -> None:
        check_device(self.device)
        check_choices(self)
        if self.device == "meta":
            raise ValueError("`device`='meta' holds no data and cannot train; use auto or cpu.")
        for name in ("steps", "batch_size", "checkpoint_every", "log_every", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1. Got {getattr(self, name)}.")
        if self.eval_every < 0:
            raise ValueError(f"`eval_every` must be >= 0 (0: never). Got {self.eval_every}.")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"`grad_clip` must be > 0 or None. Got {self.grad_clip}.")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"`ema_decay` must be in [0, 1). Got {self.ema_decay}.")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(
                f"`torch_threads` must be >= 1 or None (torch's default). Got {self.torch_threads}."
            )
        if self.max_demos is not None and self.max_demos < 1:
            raise ValueError(f"`max_demos` must be >= 1 or None. Got {self.max_demos}.")

    @property
    def events_dir(self) -> Path:
        """Where the TensorBoard event files of this run go."""
        return Path(self.out) / EVENTS_DIR

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["policy"] = self.policy.to_dict()
        return d
