"""One Rerun recording, written to an .rrd file or streamed to a viewer, and read back.

Actions become 3-D points the way a person reads them: the first three dimensions (a gantry's
x, y, z), a planar action (x, y) at z = 0, a 1-D one on the x axis.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

APPLICATION_ID = "robocompose"


def rerun() -> Any:
    """The `rerun` module, or a one-line error naming the extra that installs it."""
    try:
        import rerun as rr
    except ImportError as e:
        raise ImportError(
            f"Rerun views need the `viz` extra: pip install -e '.[viz]' ({e})."
        ) from None
    return rr


def has_display() -> bool:
    """A spawned viewer has a screen: always off Linux, on Linux an X or Wayland display."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_recording(save: str | os.PathLike[str] | None, name: str) -> Any:
    """A recording stream writing `save` (.rrd), or streaming to a spawned viewer when None."""
    if save is None and not has_display():
        raise ValueError(
            "no screen to open a Rerun viewer on ($DISPLAY and $WAYLAND_DISPLAY are unset): "
            "write the recording with --save FILE.rrd and open it with `rerun FILE.rrd` where "
            "there is one."
        )
    rr = rerun()
    stream = rr.RecordingStream(APPLICATION_ID, recording_id=name)
    if save is None:
        stream.spawn()
        return stream
    path = Path(save)
    if path.suffix != ".rrd":
        raise ValueError(f"`save` must name an .rrd file. Got {os.fspath(save)!r}.")
    path.parent.mkdir(parents=True, exist_ok=True)
    stream.save(path)
    return stream


def close_recording(stream: Any) -> None:
    """Flush and finish: the .rrd on disk is then complete."""
    stream.flush()
    stream.disconnect()


def points3d(actions: np.ndarray) -> np.ndarray:
    """(..., A) actions -> (..., 3) points: the first three dims, zero-padded."""
    actions = np.asarray(actions, dtype=np.float32)
    dims = actions.shape[-1]
    if dims >= 3:
        return actions[..., :3]
    pad = np.zeros((*actions.shape[:-1], 3 - dims), dtype=np.float32)
    return np.concatenate([actions, pad], axis=-1)


def row_counts(path: str | os.PathLike[str]) -> Counter[str]:
    """{entity path: rows} of an .rrd, read with Rerun's own reader."""
    from rerun.chunk import RrdReader

    counts: Counter[str] = Counter()
    with warnings.catch_warnings():  # a file a viewer saved has no footer: read it whole
        warnings.filterwarnings("ignore", "RRD file has no footer")
        reader = RrdReader(path)
    for chunk in reader.stream().collect().stream():
        if not chunk.entity_path.startswith("/__"):
            counts[chunk.entity_path] += chunk.num_rows
    return counts
