"""Video features as mp4: encoded lossless (H.264 in RGB, CRF 0) with PyAV, decoded once per file,
an episode's frames picked by timestamp."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from robocompose.sim.episode import DatasetError
from robocompose.sim.lerobot_dataset.layout import INFO, LAYOUT, VIDEO_CODEC, VIDEO_PIX_FMT


class VideoFrames:
    """Decoded video files, each decoded once; an episode's frames picked by timestamp."""

    def __init__(self, root: Path, video_path: str | None, fps: float) -> None:
        self.root, self.video_path, self.fps = root, video_path, fps
        self._decoded: dict[Path, tuple[np.ndarray, np.ndarray]] = {}

    def frames(
        self, feature: str, row: Mapping[str, Any], timestamps: np.ndarray, where: str
    ) -> np.ndarray:
        if not self.video_path:
            raise DatasetError(f"{self.root}/{INFO}: video feature {feature} but no `video_path`.")
        path = self.root / self.video_path.format(
            video_key=feature,
            chunk_index=int(row.get(f"videos/{feature}/chunk_index", 0)),
            file_index=int(row.get(f"videos/{feature}/file_index", 0)),
        )
        if path not in self._decoded:
            self._decoded[path] = decode_video(path)
        times, images = self._decoded[path]
        nearest = np.clip(np.searchsorted(times, timestamps), 1, max(len(times) - 1, 1))
        left = nearest - 1
        pick = np.where(
            np.abs(times[left] - timestamps) <= np.abs(times[nearest] - timestamps), left, nearest
        )
        pick = np.minimum(pick, len(times) - 1)
        off = np.abs(times[pick] - timestamps)
        if len(times) == 0 or off.max() > 0.5 / self.fps:
            raise DatasetError(
                f"{path}: no frame within half a frame of timestamp "
                f"{float(timestamps[int(np.argmax(off))]) if len(times) else timestamps[0]:.4f} s "
                f"({where})."
            )
        return images[pick]


def decode_video(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps (N,) in seconds, frames (N, H, W, 3) uint8) of an mp4, in time order."""
    import av

    if not path.is_file():
        raise DatasetError(f"{path}: missing video file; {LAYOUT}.")
    times, images = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            times.append(float(frame.pts * stream.time_base))
            images.append(frame.to_ndarray(format="rgb24"))
    order = np.argsort(times, kind="stable")
    return np.asarray(times)[order], np.stack(images)[order]


def encode_video(path: Path, frames: np.ndarray, fps: float) -> None:
    """(T, H, W, 3) uint8 as lossless H.264 in RGB (CRF 0), frame i at i / fps seconds."""
    import av

    rate = Fraction(fps).limit_denominator(1000)
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = container.add_stream(VIDEO_CODEC, rate=rate)
        stream.width, stream.height = int(frames.shape[2]), int(frames.shape[1])
        stream.pix_fmt = VIDEO_PIX_FMT
        stream.options = {"crf": "0", "preset": "veryfast"}
        stream.time_base = 1 / rate
        for i, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
