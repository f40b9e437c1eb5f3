"""Batch layouts: Reel's own, and LeRobot's (the keys and shapes a LeRobot policy's
``forward`` reads), so a LeRobot user swaps the dataset object and keeps the policy."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

REEL = "reel"
LEROBOT = "lerobot"


def lerobot_key(name: str, camera: bool) -> str:
    """LeRobot's feature key for a Reel tensor name: cameras under
    ``observation.images.``, ``state`` as ``observation.state``, ``action`` as is, other
    streams under ``observation.``; names already in LeRobot's form are kept."""
    if name.startswith("observation.") or name == "action" or name.startswith("action."):
        return name
    if camera:
        return f"observation.images.{name}"
    if name == "state":
        return "observation.state"
    return f"observation.{name}"


def lerobot_batch(
    tensors: dict[str, np.ndarray],
    episode_of: Callable[[int, int], tuple[str, int]],
    image_dtype: str,
) -> dict[str, Any]:
    """A Reel-layout batch (cameras channels-first) in LeRobot's layout:

    - ``observation.images.<camera>``: [B, T, C, H, W], uint8, or float32 in [0, 1];
      depth cameras [B, T, 1, H, W] as stored (uint16 millimetres, or float32 metres);
    - numeric streams (``observation.state``, ``action``, …): [B, T, D] float32;
    - ``<key>_is_pad``: [B, T] bool, True where the element is padding (Reel's mask 0);
    - ``timestamp``: [B] float32, the anchor's seconds from its episode's start;
    - ``episode_index``: [B] int64, the manifest row; ``task``: a list of B strings;
    - ``source``: [B] int64, which manifest of a mixture (0 for one).

    Image arrays in uint8, the numeric streams and the indices are Reel's buffers
    themselves (no copy); ``_is_pad`` and float images are computed.
    """
    out: dict[str, Any] = {}
    names = [k for k in tensors if not k.endswith((".mask", ".time_ns"))]
    for name in names:
        if name in ("anchor_ns", "episode_row", "source"):
            continue
        value = tensors[name]
        camera = value.dtype == np.uint8 and value.ndim == 5
        # Depth frames are [B, T, H, W]: a channel axis makes them LeRobot images (a view).
        depth = value.ndim == 4
        if depth:
            value = value[:, :, None]
        key = lerobot_key(name, camera or depth)
        if camera and image_dtype == "float32":
            value = value.astype(np.float32)
            value *= 1.0 / 255.0
        out[key] = value
        mask = tensors.get(f"{name}.mask")
        if mask is not None:
            out[f"{key}_is_pad"] = mask == 0
    rows = tensors["episode_row"]
    sources = tensors["source"]
    anchors = tensors["anchor_ns"]
    episodes = [episode_of(int(r), int(k)) for r, k in zip(rows, sources)]
    starts = np.array([start for _, start in episodes], dtype=np.int64)
    out["timestamp"] = ((anchors - starts) / 1e9).astype(np.float32)
    out["episode_index"] = rows
    out["source"] = sources
    out["task"] = [task for task, _ in episodes]
    return out
